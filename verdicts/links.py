"""Nemeses that break links between test hosts (``stack.hosts``), for a sale whose
instances run on hosts of their own (``stack.hosted``): the kernel drops the
packets, nothing is signalled to any process. Each strikes app1's links mid-sale
and heals after ``down_seconds``: longer than the locks' 5 s lease, so a holder cut
off keeps working past it, as in Kleppmann's critique of Redlock (seed 003).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from stack.config import StackConfig
from stack.hosted import HostedApps

PAST_THE_LEASE = 8.0  # seconds; the Redis locks' lease is 5 s


@dataclass(frozen=True)
class LinkFault:
    name: str
    summary: str
    act: Callable[[HostedApps], None]
    down_seconds: float = PAST_THE_LEASE
    loses_redis: bool = False
    hosted: HostedApps | None = None  # bound by ``on``

    def on(self, hosted: HostedApps) -> LinkFault:
        return dataclasses.replace(self, hosted=hosted)

    def inject(self, config: StackConfig) -> list[str]:
        self.act(self.hosted)
        return [self.name]

    def heal(self, config: StackConfig, names: list[str]) -> None:
        for host in self.hosted.net.hosts.values():
            host.heal()


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
        LinkFault("slow-app", "app1's link shaped to 64 kbit/s (tbf) for 8 s: every byte it sends "
                  "queues", lambda h: h.apps[0].slow(64)),
    )
}
