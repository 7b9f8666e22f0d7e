"""Nemeses that break links between test hosts (``stack.hosts``), for a sale whose
instances run on hosts of their own (``stack.hosted``): the kernel drops the
packets, nothing is signalled to any process. Each strikes app1's links mid-sale
and heals after ``down_seconds``: longer than the locks' 5 s lease, so a holder cut
off keeps working past it, as in Kleppmann's critique of Redlock (seed 003).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from stack.config import StackConfig
from stack.hosted import REDIS_PORT, HostedApps

PAST_THE_LEASE = 8.0  # seconds; the Redis locks' lease is 5 s

# The lesson on leases needs a holder's stalled write to land after its lease ran out
# and another holder sold: a partition longer than the lease, and shorter than what
# ends a stalled transaction first (MariaDB's idle-transaction timeout, 6 s by default,
# and the purchase's 8 s deadline, with TCP's backoff on top). So its instances take a
# 2 s lease, a 1 s lock wait (waiters give up and come back through app2 in time), and
# a 10 s idle-transaction timeout; the partition lasts 3 s.
LEASE_LESSON = {"FLASHSALE_SETNX_TTL_MS": "2000", "FLASHSALE_LOCK_WAIT_TIMEOUT": "1",
                "DB_IDLE_TRANSACTION_TIMEOUT": "10"}
PAST_A_2_S_LEASE = 3.0


@dataclass(frozen=True)
class LinkFault:
    name: str
    summary: str
    act: Callable[[HostedApps], None]
    down_seconds: float = PAST_THE_LEASE
    loses_redis: bool = False
    # Until it strikes, every buyer buys from app1, so that it strikes app1 holding the lock.
    first_app: bool = False
    # The instances it needs: their critical-section delay (None: the run's); fenced
    # False: the fencing stamp off (the broken half: not linearizable, as designed).
    section_delay_ms: float | None = None
    fenced: bool = True
    environment: tuple[tuple[str, str], ...] = ()  # over the stack's settings
    hosted: HostedApps | None = None  # bound by ``on``

    def on(self, hosted: HostedApps) -> LinkFault:
        return dataclasses.replace(self, hosted=hosted)

    def inject(self, config: StackConfig) -> list[str]:
        self.act(self.hosted)
        return [self.name]

    def heal(self, config: StackConfig, names: list[str]) -> None:
        for host in self.hosted.net.hosts.values():
            host.heal()


def _cut_the_holder(hosted: HostedApps) -> None:
    """Cut app1 off from MariaDB once the setnx lock has had one holder for 40 ms:
    past its read of the stock, inside its 200 ms critical section (every buyer buys
    from app1 until the strike, so the holder is app1's). Watched in the hosts' Redis,
    where the lock is a key holding its holder's token."""
    client = redis.Redis(host=hosted.redis.address, port=REDIS_PORT, socket_timeout=1)
    deadline = time.monotonic() + 5
    try:
        while time.monotonic() < deadline:
            keys = [k for k in client.scan_iter(match="flashsale:lock:stock:*") if not k.endswith(b":fence")]
            token = client.get(keys[0]) if keys else None
            if token is not None:
                time.sleep(0.04)
                if client.get(keys[0]) == token:
                    break
            time.sleep(0.005)
    finally:
        client.close()
    hosted.apps[0].partition(hosted.db)


LINK_FAULTS: dict[str, LinkFault] = {
    fault.name: fault
    for fault in (
        LinkFault("partition-app-db", "app1 cut off from MariaDB both ways for 8 s: its open transactions "
                  "stall holding their row locks while its Redis lease runs out",
                  lambda h: h.apps[0].partition(h.db)),
        LinkFault("partition-app-redis", "app1 cut off from Redis both ways for 8 s: a lock it holds "
                  "expires under it; it can neither take nor release one",
                  lambda h: h.apps[0].partition(h.redis)),
        LinkFault("loss-app-db", "30 % of the packets between app1 and MariaDB dropped, each way, for 8 s",
                  lambda h: h.apps[0].lose(h.db, 30)),
        LinkFault("partition-buyers-app", "the buyers cut off from app1 for 8 s: purchases it took are "
                  "answered into the void; their buyers time out and retry",
                  lambda h: h.apps[0].partition(h.net.local)),
        LinkFault("partition-holder-db", "app1, holding the setnx lock (2 s lease) 40 ms into a 200 ms "
                  "critical section, cut off from MariaDB for 3 s: its lease runs out, app2 takes the "
                  "lock, and app1's stalled write lands after",
                  _cut_the_holder, down_seconds=PAST_A_2_S_LEASE, first_app=True,
                  section_delay_ms=200.0, environment=tuple(LEASE_LESSON.items())),
        LinkFault("partition-holder-db-unfenced", "the same, on instances without the stock row's "
                  "fencing stamp (flashsale.settings.unfenced): the broken half",
                  _cut_the_holder, down_seconds=PAST_A_2_S_LEASE, first_app=True,
                  section_delay_ms=200.0, fenced=False, environment=tuple(LEASE_LESSON.items())),
        LinkFault("slow-app", "app1's link shaped to 64 kbit/s (tbf) for 8 s: every byte it sends "
                  "queues", lambda h: h.apps[0].slow(64)),
    )
}
