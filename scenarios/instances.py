"""A process-local lock behind a load balancer (S1): it restarts the stack's app
instances with the strategy under test and sends a burst through nginx."""

from __future__ import annotations

import uuid

from loadtest.burst import burst

from .base import Half, Outcome, Scenario
from .context import Context

STOCK, ATTEMPTS, BUYERS = 20, 200, 32
APPS = dict(instances=2, workers=2, section_delay_ms=20.0)


def s1_local_lock_across_instances(ctx: Context) -> Outcome:
    if ctx.apps is None:
        raise RuntimeError("S1 restarts the stack's app instances: run it with the stack up")

    def sale(strategy: str) -> dict:
        client = ctx.apps(strategy=strategy, **APPS)
        sku = f"s1-{strategy}-{uuid.uuid4().hex[:6]}"
        client.reset(sku, STOCK)
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
             "once. The scenario restarts the stack's instances with `local`, then with "
             "`redisson`, and sends 200 purchases from 32 buyers for 20 units through nginx "
             "(20 ms of work inside the section); the instances are put back afterwards.",
             s1_local_lock_across_instances, needs=("stack",)),
]
