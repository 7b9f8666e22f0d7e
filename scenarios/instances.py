"""A process-local lock behind a load balancer (S1): the stack's app instances, two of
two workers each with work inside the section, sell a product under each strategy
(its reset's) to a burst through nginx."""

from __future__ import annotations

import uuid

from loadtest.burst import burst

from .base import Half, Outcome, Scenario
from .context import Context

STOCK, ATTEMPTS, BUYERS = 20, 200, 32
APPS = dict(instances=2, workers=2, section_delay_ms=20.0)


def s1_local_lock_across_instances(ctx: Context) -> Outcome:
    if ctx.apps is None:
        raise RuntimeError("S1 sells on the stack's app instances: run it with the stack up")

    def sale(strategy: str) -> dict:
        client = ctx.apps(**APPS)
        sku = f"s1-{strategy}-{uuid.uuid4().hex[:6]}"
        client.reset(sku, STOCK, strategy=strategy)
        result = burst(base_url=client.base_url, sku=sku, attempts=ATTEMPTS, concurrency=BUYERS,
                       tokens=client.tokens)
        audit = client.audit(sku)
        return {"processes (instances × workers)": APPS["instances"] * APPS["workers"],
                "purchases sent": ATTEMPTS, "stock": STOCK, "orders": audit["orders"],
                "oversold": audit["oversold"], "lost updates": audit["lost_updates"],
                "answers without a status": result.errors}

    figures = sale("local")
    broken = Half("local: a threading.Lock per process", figures,
                  failed=figures["oversold"] > 0 or figures["lost updates"] > 0)
    figures = sale("redisson")
    fixed = Half("redisson: one lock in Redis for every process", figures,
                 failed=figures["oversold"] != 0 or figures["lost updates"] != 0
                 or figures["orders"] != STOCK)
    return Outcome(broken, fixed)


SCENARIOS = [
    Scenario("S1", "a process-local lock across two instances", "001",
             "A synchronized block or threading.Lock excludes threads of one process only. "
             "Behind nginx, two instances of two workers each run four critical sections at "
             "once. The scenario runs the stack's instances with 20 ms of work inside the "
             "section, resets one product under `local` and another under `redisson`, and "
             "sends each 200 purchases from 32 buyers for 20 units through nginx; the "
             "instances are put back afterwards.",
             s1_local_lock_across_instances, needs=("stack",)),
]
