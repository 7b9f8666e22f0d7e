"""The fair Redisson-style lock against a real Redis: the line, its order, its
clean-up, and everything it keeps from ``redisson``.

Each waiter joins the line only after the one before it is seen there, so the
order under test is the order of arrival, not a race. Time bounds are behaviour,
several times wider than the effect they check.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from common.testing import in_thread, start_thread, wait_until
from locking.backends.redis.wakeups import Wakeups

from .conftest import PAST_THREE_LEASES_S, WATCHED_LEASE_MS

ROOT = Path(__file__).resolve().parents[2]


def line_up(backend, n: int, served: list, *, hold: float = 0.01, timeout: float = 10,
            ahead: int = 0) -> list:
    """Start ``n`` threads that each wait for the lock "f" and, served, append their
    number to ``served``; each joins the line after the one before it is in it
    (behind ``ahead`` waiters already there)."""
    head = backend.lock("f")
    threads = []
    for i in range(n):
        def wait(i=i):
            lock = backend.lock("f")
            assert lock.acquire(timeout=timeout)
            served.append(i)
            time.sleep(hold)
            lock.release()

        threads.append(start_thread(wait)[0])
        def queued(n: int = ahead + i + 1) -> bool:
            return len(head.waiting()) == n

        wait_until(queued)
    return threads


def test_waiters_are_served_in_the_order_they_joined(redisson_fair):
    backend = redisson_fair()
    holder = backend.lock("f")
    holder.acquire()
    served = []
    threads = line_up(backend, 6, served)
    holder.release()
    for t in threads:
        t.join()
    assert served == list(range(6))
    assert holder.waiting() == [] and not holder.locked()


def test_a_thread_that_releases_cannot_take_it_back_ahead_of_the_line(redisson_fair):
    backend = redisson_fair()
    lock = backend.lock("f")
    lock.acquire()
    served = []
    threads = line_up(backend, 1, served, hold=0.5)
    lock.release()
    # The barging re-acquire that redisson allows: refused while the first in line waits.
    assert not lock.acquire(blocking=False)
    assert lock.acquire(timeout=5)
    assert served == [0]  # it got its turn first
    lock.release()
    for t in threads:
        t.join()


def test_a_non_blocking_try_does_not_join_the_line(redisson_fair):
    backend = redisson_fair()
    lock = backend.lock("f")
    lock.acquire()
    assert in_thread(lambda: backend.lock("f").acquire(blocking=False)) is False
    assert lock.waiting() == []
    lock.release()


def _start_line_waiter(redis_url, key_prefix, waiter_timeout_ms, served):
    return subprocess.Popen(
        [sys.executable, "-m", "locking.tests.workers", "wait-in-line", redis_url, key_prefix,
         str(waiter_timeout_ms), served], cwd=ROOT)


def test_waiters_in_other_processes_are_served_in_the_order_they_joined(redisson_fair, redis_url, key_prefix,
                                                                        redis_client):
    lock = redisson_fair().lock("line")
    lock.acquire()
    served = f"{key_prefix}served"
    children, joined = [], []
    try:
        for _ in range(4):
            children.append(_start_line_waiter(redis_url, key_prefix, 3_000, served))
            wait_until(lambda: len(lock.waiting()) == len(children), timeout=30)
            joined.append(lock.waiting()[-1])
        lock.release()
        for child in children:
            assert child.wait(timeout=30) == 0
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert [h.decode() for h in redis_client.lrange(served, 0, -1)] == joined


def test_a_dead_waiter_is_dropped_after_its_timeout_and_the_next_is_served(redisson_fair, redis_url,
                                                                          key_prefix, redis_client):
    waiter_timeout_ms = 600
    backend = redisson_fair(waiter_timeout_ms=waiter_timeout_ms)
    lock = backend.lock("line")
    lock.acquire()
    served = f"{key_prefix}served"
    doomed = _start_line_waiter(redis_url, key_prefix, waiter_timeout_ms, served)
    try:
        wait_until(lambda: len(lock.waiting()) == 1, timeout=30)
        dead = lock.waiting()[0]
        got = {}

        def next_in_line():
            mine = backend.lock("line")
            assert mine.acquire(timeout=10)
            got["after"] = time.monotonic() - killed
            mine.release()

        # In line behind it while it still asks: killed first, it could be dropped
        # before this one joins on a slow machine, and the line would never be two.
        thread = start_thread(next_in_line)[0]
        wait_until(lambda: len(lock.waiting()) == 2)
        assert lock.waiting()[0] == dead  # first in line
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait()
        killed = time.monotonic()  # and now gone
        lock.release()
        thread.join()
        # Nobody wakes for the dead: the live waiter's own asks drop it once it has
        # not asked for waiter_timeout_ms, and then take the lock.
        assert got["after"] <= waiter_timeout_ms / 1000 + 1.0, got
        assert dead not in lock.waiting()
        assert redis_client.llen(served) == 0
    finally:
        if doomed.poll() is None:
            doomed.kill()
            doomed.wait()


def test_a_timed_out_acquire_leaves_the_line_clean(redisson_fair, redis_client):
    backend = redisson_fair()
    lock = backend.lock("f")
    lock.acquire()
    started = time.monotonic()
    assert in_thread(lambda: backend.lock("f").acquire(timeout=0.5)) is False
    assert 0.45 <= time.monotonic() - started < 5.0  # its timeout, with a slow machine's slack
    assert lock.waiting() == []
    assert redis_client.zcard(lock.deadlines) == 0
    lock.release()
    assert not redis_client.exists(lock.line, lock.deadlines)


def test_a_first_in_line_who_leaves_while_the_lock_is_free_wakes_the_next(redisson_fair):
    backend = redisson_fair(waiter_timeout_ms=30_000)  # asks every 10 s: only a message wakes it
    lock = backend.lock("f")
    lock.acquire()
    # A waiter that never listens (as one whose wait just timed out), first in line.
    assert lock._acquire_script("ghost", waiting=True)[0] == 0
    served = []
    threads = line_up(backend, 1, served, ahead=1)
    lock.release()  # its message names the ghost, who does not hear it
    time.sleep(0.3)
    assert served == [] and not lock.locked()
    left = time.monotonic()
    lock._give_up("ghost")
    for t in threads:
        t.join()
    assert served == [0]
    assert time.monotonic() - left < 5.0  # woken by the leave, not its ask 10 s later


def test_reentrant_and_released_as_often_as_taken(redisson_fair):
    lock = redisson_fair().lock("f")
    assert lock.acquire() and lock.acquire()
    assert lock.hold_count() == 2
    fence = lock.fence
    lock.release()
    assert lock.fence == fence  # the holding's token, kept by the re-entry
    assert not in_thread(lambda: lock.acquire(blocking=False))
    lock.release()
    assert not lock.locked()
    assert in_thread(lambda: lock.acquire(blocking=False))


def test_fencing_tokens_grow_with_every_holder(redisson_fair):
    backend = redisson_fair()
    tokens = []
    for _ in range(3):
        lock = backend.lock("f")
        lock.acquire()
        tokens.append(lock.fence)
        lock.release()
    assert tokens == sorted(tokens) and len(set(tokens)) == 3


def test_the_watchdog_keeps_the_lock_past_three_leases(redisson_fair, unstalled):
    backend = redisson_fair(watchdog_timeout_ms=WATCHED_LEASE_MS)

    def attempt(name):
        lock = backend.lock(name)
        lock.acquire()
        time.sleep(PAST_THREE_LEASES_S)
        assert lock.owned() and 0 < lock.ttl_ms() <= WATCHED_LEASE_MS
        lock.release()
        assert not backend.watchdog.watching(lock.key, lock.holder())

    unstalled(attempt)


def test_force_release_wakes_the_first_in_line(redisson_fair):
    backend = redisson_fair(waiter_timeout_ms=30_000)
    lock = backend.lock("f")
    lock.acquire()
    served = []
    threads = line_up(backend, 2, served)
    assert lock.force_release()
    for t in threads:
        t.join()
    assert served == [0, 1]


def test_a_named_message_wakes_that_waiter_only(redis_client):
    wakeups = Wakeups(redis_client, standing_channel="test:wakeups:standing")
    woke = {}

    def wait(name):
        with wakeups.subscribed("test:wakeups:line", address=name) as sub:
            woke[name] = sub.wait(1.5, address=name)

    threads = [start_thread(lambda n=n: wait(n))[0] for n in ("first", "second")]
    wait_until(lambda: redis_client.pubsub_numsub("test:wakeups:line")[0][1] == 1)
    time.sleep(0.2)
    redis_client.publish("test:wakeups:line", "first")
    for t in threads:
        t.join()
    wakeups.close()
    assert woke == {"first": True, "second": False}
