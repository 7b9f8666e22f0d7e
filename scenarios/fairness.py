"""S18: an unfair lock starves a buyer who is farther from Redis than the holder."""

from __future__ import annotations

import threading
import time

import redis

from .base import Half, Outcome, Scenario
from .context import Context

# How much later every command of the far buyer reaches Redis.
FAR = 0.1
# The re-acquirer's hold, seconds: five of the far buyer's commands, so that each ask
# it sends on a release's message (or at the start, or after subscribing) lands while
# the re-acquirer holds the lock again.
HOLD = 0.5
BUYER_WAIT = 3.0  # the buyer's wait timeout, seconds: six holds
# Commands before a waiter is in the fair lock's line: a try, its subscription, its
# try in line (RedissonLock.do_acquire).
TO_THE_LINE = 3


class Gap:
    """The moment between the near re-acquirer's release and its next ask. On a real
    network it lasts the near client's round trip, far shorter than ``FAR``; a loaded
    machine can stretch it (the thread waits for a core) past ``FAR``, and let the far
    buyer's ask in now and then. So the far buyer's commands wait it out: the near
    client asks first after each release, as its distance makes it do."""

    def __init__(self) -> None:
        self._closed = threading.Event()
        self._closed.set()

    def open(self) -> None:
        self._closed.clear()

    def close(self) -> None:
        self._closed.set()

    def waited_out(self) -> None:
        self._closed.wait(timeout=10)


def far_connection(gap: Gap) -> type[redis.Connection]:
    class FarConnection(redis.Connection):
        """A client 100 ms away: every command it sends arrives that much later, and
        never inside the near client's release-and-ask."""

        def send_packed_command(self, command, check_health=True):
            time.sleep(FAR)
            gap.waited_out()
            return super().send_packed_command(command, check_health)

    return FarConnection


def starved_or_served(near, far, gap: Gap) -> dict:
    """A re-acquirer next to Redis takes the lock, holds it ``HOLD``, lets go and
    asks again at once, for as long as the far buyer waits; the buyer asks once, with
    a ``BUYER_WAIT`` timeout, just after the re-acquirer took the lock."""
    stop, held = threading.Event(), threading.Event()
    acquisitions = []

    def re_acquirer():
        lock = near.lock("s18")
        holding = False
        while not stop.is_set():
            if not holding:  # the first time, or in the fair lock's line behind the far buyer
                holding = lock.acquire()
                continue
            acquisitions.append(time.monotonic())
            held.set()
            time.sleep(HOLD)
            gap.open()
            try:
                lock.release()
                # Its ask at once: the unfair lock is free to whoever asks; the fair
                # one refuses it while the far buyer waits in line.
                holding = lock.acquire(blocking=False)
            finally:
                gap.close()
        if holding:
            lock.release()

    # The far buyer's connections (commands and wake-ups) and scripts are set up
    # first: setting them up is far too, and not what this measures.
    with far.lock("s18-warm-up"), far.wakeups.subscribed("s18-warm-up"):
        pass
    thread = threading.Thread(target=re_acquirer)
    thread.start()
    try:
        held.wait(5)
        asked = time.monotonic()
        buyer = far.lock("s18")
        served = buyer.acquire(timeout=BUYER_WAIT)
        waited = time.monotonic() - asked
        if served:
            buyer.release()
    finally:
        stop.set()
        thread.join()
    in_line = asked + TO_THE_LINE * FAR  # the earliest its ask in line reaches Redis
    ended = asked + waited
    return {"buyer served": served,
            "buyer waited (ms)": round(waited * 1000),
            "re-acquisitions while it waited": sum(asked < t < ended for t in acquisitions),
            "re-acquisitions once it could be in line": sum(in_line < t < ended for t in acquisitions)}


def s18_unfair_lock_starves_a_far_buyer(ctx: Context) -> Outcome:
    gap = Gap()
    figures = starved_or_served(ctx.redisson(), ctx.redisson(connection_class=far_connection(gap)), gap)
    broken = Half("redisson: whoever asks first after a release", figures,
                  failed=not figures["buyer served"])
    gap = Gap()
    figures = starved_or_served(ctx.redisson_fair(), ctx.redisson_fair(connection_class=far_connection(gap)),
                                gap)
    # In turn: behind the one holding, and the one it may have found first in line.
    overtaken = figures["re-acquisitions once it could be in line"]
    fixed = Half("redisson-fair: the first in line", figures,
                 failed=not figures["buyer served"] or overtaken > 2)
    return Outcome(broken, fixed)


SCENARIOS = [
    Scenario("S18", "an unfair lock starves the buyer who is farther away", "004 (这把锁最好是一把公平锁)",
             "Redisson's RLock goes to whoever asks first after a release. A holder next to "
             "Redis that lets go and asks again at once always asks first; a buyer 100 ms away "
             "is woken by the release, asks, and finds the lock taken again, every time, "
             "until its wait runs out. Redisson's fair lock keeps a line: only the first in "
             "line may take it. You will see one buyer wait behind a re-acquirer that holds "
             "the lock half a second at a time, under each lock.", s18_unfair_lock_starves_a_far_buyer),
]
