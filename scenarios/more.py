"""Scenarios beyond the SETNX family: the ZooKeeper herd (S11) and the retried
request without an operation flag (S13)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from loadtest.round_trips import CountingConnection, round_trips
from locking.backends import zookeeper
from locking.backends.zookeeper import ZooKeeperLockBackend
from locking.teaching.zookeeper_herd import HerdEffectZooKeeperLockBackend
from locking.teaching.zookeeper_herd import watching as herd_watching

from .base import Half, Outcome, Scenario
from .context import Context


@dataclass
class Drained:
    counted: int  # how far the counter moved from the first release to the last
    acquired: list[float]  # monotonic times, one per waiter
    released: list[float]  # the holder's release and each waiter's


def drain_queue(backend, waiters: int, counter: Callable[[], int], hold: float,
                settled: Callable[[object, int], bool] | None = None) -> Drained:
    """``waiters`` threads queue behind a holder; once all wait, the holder lets go
    and each takes the lock once, holding it ``hold`` seconds, and (with ``settled``)
    until ``settled(lock, n)`` says the n still waiting wait again, however long
    that takes this machine."""

    def held(lock, waiting: int) -> None:
        time.sleep(hold)
        deadline = time.monotonic() + 30
        while settled is not None and not settled(lock, waiting) and time.monotonic() < deadline:
            time.sleep(0.005)

    name = f"queue-{waiters}-{uuid.uuid4().hex[:6]}"
    holder = backend.lock(name)
    holder.acquire()
    ready = threading.Barrier(waiters + 1)
    acquired: list[float] = []
    released: list[float] = []

    def waiter():
        lock = backend.lock(name)
        ready.wait()
        assert lock.acquire(timeout=60)
        acquired.append(time.monotonic())
        held(lock, waiters - len(acquired))
        released.append(time.monotonic())
        lock.release()

    threads = [threading.Thread(target=waiter) for _ in range(waiters)]
    for t in threads:
        t.start()
    ready.wait()
    time.sleep(0.5)  # every waiter is waiting (watching, subscribed or polling)
    held(holder, waiters)
    before = counter()
    released.append(time.monotonic())
    holder.release()
    for t in threads:
        t.join()
    return Drained(counter() - before, acquired, released)


def wakeups_for_a_queue(backend, kind: str, waiters: int) -> int:
    """Watch wake-ups while a queue drains, each holder keeping the lock long
    enough (0.1 s; the herd's, until every waiter left watches again) for the others
    to watch again."""
    settled = (lambda lock, waiting: herd_watching(lock) >= waiting) if kind == "herd" else None
    return drain_queue(backend, waiters, lambda: zookeeper.wakeups(kind), hold=0.1, settled=settled).counted


def s11_herd_effect(ctx: Context) -> Outcome:
    def queue(backend_cls, kind) -> dict:
        backend = ctx.zookeeper(backend_cls)
        counts = {n: wakeups_for_a_queue(backend, kind, n) for n in (4, 8)}
        return {"wake-ups, 4 waiters": counts[4], "wake-ups, 8 waiters": counts[8],
                "growth 4 → 8 waiters": f"{counts[8] / counts[4]:.1f}x"}

    figures = queue(HerdEffectZooKeeperLockBackend, "herd")
    broken = Half("one node, every waiter watches it", figures,
                  failed=figures["wake-ups, 8 waiters"] >= 8 * 9 // 2)  # n(n+1)/2
    figures = queue(ZooKeeperLockBackend, "recipe")
    fixed = Half("sequential nodes, watch the predecessor", figures,
                 failed=figures["wake-ups, 8 waiters"] > 8)
    return Outcome(broken, fixed)


def s13_retry_without_operation_flag(ctx: Context) -> Outcome:
    client = ctx.api()

    def buy_twice(sku: str, key: str | None) -> dict:
        client.reset(sku, 10)
        buyer, headers = client.as_buyer("retrying-buyer")
        headers |= {"Idempotency-Key": key} if key else {}
        statuses = []
        for _ in range(2):  # the first answer was lost on the way back; the client retries
            response = client.session.post(f"{client.base_url}/api/orders", headers=headers,
                                           json={"sku": sku, "quantity": 1, **buyer})
            statuses.append(response.status_code)
        audit = client.audit(sku)
        return {"answers": " ".join(map(str, statuses)), "orders": audit["orders"],
                "stock taken": audit["initial_stock"] - audit["remaining"],
                "stock-flow rows": audit["flow_rows"]}

    figures = buy_twice(ctx.key("s13-broken").replace(":", "-")[-40:], None)
    broken = Half("retry without an operation flag", figures, failed=figures["orders"] == 2)
    figures = buy_twice(ctx.key("s13-fixed").replace(":", "-")[-40:], uuid.uuid4().hex)
    fixed = Half("the same Idempotency-Key on the retry", figures, failed=figures["orders"] != 1)
    return Outcome(broken, fixed)


SCENARIOS = [
    Scenario("S11", "ZooKeeper single-node lock: the herd effect", "002, 000",
             "When every waiter watches the one lock node, each release wakes them all to race "
             "for it again. You will see the wake-ups of a queue of 4 and of 8 waiters under "
             "each design.", s11_herd_effect, needs=("zookeeper",)),
    Scenario("S13", "retried request without an operation flag", "002",
             "A purchase whose answer is lost gets retried. Without an operation flag the "
             "stock service cannot tell the retry from a new purchase. You will see one buyer "
             "send the same purchase twice through nginx.", s13_retry_without_operation_flag,
             needs=("stack",)),
]


def round_trips_and_handoff(backend, waiters: int) -> dict:
    """Round trips to Redis per acquisition (counted in the client: polls and
    wake-ups, retries included) and the median release-to-acquire handoff, while a
    queue drains with 10 ms holds."""
    drained = drain_queue(backend, waiters, round_trips, hold=0.01)
    # The k-th acquisition follows the k-th release: the lock is exclusive.
    handoffs = sorted(a - r for a, r in zip(sorted(drained.acquired), sorted(drained.released),
                                            strict=False))
    return {"round_trips": drained.counted / waiters, "handoff_ms": handoffs[len(handoffs) // 2] * 1000}


def s9_polling_vs_notification(ctx: Context) -> Outcome:
    def measure(backend) -> dict:
        small, large = round_trips_and_handoff(backend, 4), round_trips_and_handoff(backend, 32)
        return {"round trips / acquisition, 4 waiters": round(small["round_trips"], 1),
                "round trips / acquisition, 32 waiters": round(large["round_trips"], 1),
                "growth": round(large["round_trips"] / small["round_trips"], 1),
                "handoff p50 (ms), 32 waiters": round(large["handoff_ms"], 1)}

    figures = measure(ctx.setnx(retry_interval=0.02, connection_class=CountingConnection))
    broken = Half("setnx: poll every 20 ms", figures, failed=figures["growth"] >= 2)
    figures = measure(ctx.redisson(connection_class=CountingConnection))
    fixed = Half("redisson: woken by a message", figures, failed=figures["growth"] >= 1.5)
    return Outcome(broken, fixed)


SCENARIOS.append(
    Scenario("S9", "waiting by polling vs by notification", "000 问题4",
             "A waiter that polls asks Redis again and again while it waits, so the round trips "
             "per acquisition grow with the queue, and it notices a release only at its next "
             "poll. A waiter woken by a pub/sub message asks once. You will see a queue of 4 "
             "and of 32 waiters drained under each.", s9_polling_vs_notification))
