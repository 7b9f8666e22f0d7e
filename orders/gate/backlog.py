"""What waits to be written, over the gate's live sales (the persisters' list), read
from Redis when Prometheus scrapes an app instance (``FLASHSALE_METRICS_COLLECTORS``):
read by the apps, not the persisters, so that it shows with every persister down,
when it matters most.

Every instance reads the same Redis and reports the same figures, so the rules take
the ``max`` over them, not the sum. Never by sku: summed over the sales.
"""

from __future__ import annotations

from collections.abc import Iterator

import redis
from prometheus_client.core import GaugeMetricFamily

from common.gateredis import stream_entries, text

from .lifecycle import gate_listed
from .store import GROUP, gate_keys, gate_redis
from .tally import GateTally, gate_tallies


class GateBacklogCollector:
    """At scrape time, over the sales on the persisters' list: the entries no
    persister has read, those read and not yet acknowledged, and the stock Redis has
    left; and the dead letters of every sale. A Redis that cannot be reached yields
    none of them (``flashsale_collector_up{collector="gate_backlog"}`` says so)."""

    name = "gate_backlog"

    def collect(self) -> Iterator[GaugeMetricFamily]:
        listed = gate_listed()
        tallied = [(sku, tally) for sku, tally in gate_tallies(listed).items() if tally is not None]
        tallies = [tally for _, tally in tallied]
        # Every sale's, listed or not: a finished sale leaves the list, and its
        # dead letters wait for an operator until redriven.
        client = gate_redis()
        dead = sum(client.xlen(key) for key in client.scan_iter(match="gate:*:dead", count=1000))
        # The backlog's age: it keeps growing while the persisters stop, when the
        # confirm histogram (observed as orders are written) goes silent.
        oldest = [ms for sku, tally in tallied if (ms := oldest_unwritten_ms(client, sku, tally)) is not None]
        waited = 0.0
        if oldest:
            seconds, micros = client.time()
            waited = max(0.0, seconds + micros / 1e6 - min(oldest) / 1000)
        undelivered = sum(t.undelivered for t in tallies)
        pending = sum(t.unacknowledged for t in tallies)
        stock = sum(t.redis_remaining for t in tallies)
        gauges = {
            "flashsale_gate_sales_listed": ("Sales on the persisters' list (their orders may still wait)",
                                            len(listed)),
            "flashsale_gate_backlog": ("Orders accepted, neither written nor dead-lettered yet, over the "
                                       "live sales", undelivered + pending),
            "flashsale_gate_pending": ("Orders a persister read and has not acknowledged (its batch in hand)",
                                       pending),
            "flashsale_gate_dead_letters": ("Orders the database refused, set aside until redriven", dead),
            "flashsale_gate_stock_left": ("Units the gate's Redis has left, over the live sales", stock),
            "flashsale_gate_oldest_unwritten_seconds": (
                "How long the oldest order not yet written has waited since accepted (0: none)", waited),
        }
        for name, (documentation, value) in gauges.items():
            yield GaugeMetricFamily(name, documentation, value=value)


def oldest_unwritten_ms(client: redis.Redis, sku: str, tally: GateTally) -> int | None:
    """When the oldest order of ``sku``'s sale not yet written was accepted (ms on
    Redis's clock: its stream entry's id): the oldest a persister holds
    unacknowledged, or else the first no persister has read (after the group's last
    delivered, as ``tally`` read it). None: none waits, and Redis is not asked."""
    stream = gate_keys(sku).stream
    ids: list[str] = []
    if tally.unacknowledged:
        held = client.xpending(stream, GROUP)["min"]
        if held is not None:  # None: acknowledged since the tally was read
            ids.append(text(held))
    if tally.undelivered:
        after = f"({tally.last_delivered}" if tally.last_delivered else "-"
        ids += [entry for entry, _ in stream_entries(client.xrange(stream, min=after, max="+", count=1))]
    return min(int(entry.partition("-")[0]) for entry in ids) if ids else None
