"""The nodes a sale of N purchases a second needs, from one run's measured costs
(``benchmarks.capacity``): each part's CPU a purchase of a sale spread over many
products, and the gate's Redis shard's script rate.

A part's cores are the rate times its CPU a purchase, each core planned three
quarters busy; the gate's shards, the rate over three quarters of one shard's
script rate (a shard runs one script at a time, on one core). The assumptions, which
the report states beside the table: the sale is spread over many products (one hot
product is bounded by its own ceiling, whatever the nodes: the hot table); every
purchase buys (a refusal after the sell-out costs less); the servers answer over
loopback here, where a network adds its round trips to what a lock holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HEADROOM = 0.75  # the share of each core a plan counts on
RATES = (10_000, 50_000, 200_000)


@dataclass(frozen=True)
class PerPurchase:
    """CPU µs a purchase that bought, by role, in a sale spread over many products."""

    apps: float
    mariadb: float
    redis: float
    persisters: float


def cores(rate: float, cpu_us: float) -> int:
    """The cores that serve ``rate`` a second at ``cpu_us`` each, three quarters busy."""
    return math.ceil(rate * cpu_us / 1e6 / HEADROOM)


def plan(spread: dict[str, PerPurchase], shard_ceiling: float,
         rates: tuple[int, ...] = RATES) -> list[list[str]]:
    """A row a rate and design: purchases a second, design, app cores, Redis (the
    gate's shards, or the cache's cores), persister cores, MariaDB primary cores."""
    rows = []
    for rate in rates:
        for design in ("atomic", "gate"):
            cost = spread[design]
            if design == "gate":
                shards = math.ceil(rate / (shard_ceiling * HEADROOM))
                redis = f"{shards} shard{'s' if shards > 1 else ''} (a primary and its replica each)"
                persisters = str(cores(rate, cost.persisters))
            else:
                redis = f"{cores(rate, cost.redis)} core(s) of the cache's Redis"
                persisters = "–"
            rows.append([f"{rate:,}", design, str(cores(rate, cost.apps)), redis, persisters,
                         str(cores(rate, cost.mariadb))])
    return rows


def table(spread: dict[str, PerPurchase], shard_ceiling: float) -> str:
    """The plan as the capacity report prints it, its assumptions first."""
    lines = [f"**What a sale needs**, from the figures above: each part's cores are the rate times its "
             f"CPU a purchase (the spread table), each core {HEADROOM:.0%} busy; the gate's shards, the "
             f"rate over {HEADROOM:.0%} of one shard's script rate ({shard_ceiling:,.0f}). Assumed: a sale "
             "spread over many products (a hot product stops at its own ceiling, above, whatever the "
             "nodes), every purchase an order (a refusal after the sell-out costs less), and the servers' "
             "CPU as on loopback here (a network adds round trips to what a lock holds, not CPU). "
             "MariaDB is one primary: past one machine's cores the plan is no longer one database.\n",
             "| purchases a second | design | app cores | Redis | persister cores | MariaDB primary cores |",
             "|---:|---|---:|---|---:|---:|"]
    lines += ["| " + " | ".join(row) + " |" for row in plan(spread, shard_ceiling)]
    return "\n".join(lines)
