"""Histories made up with a known answer, for the checker's tests and its benchmark.

``concurrent_sale`` lets ``clients`` buyers each send purchases one after another;
every purchase takes effect at a random instant inside its interval, and its answer
is what the sequential sale says at that instant: linearizable by construction. A
test breaks one answer to get a history that is not.
"""

from __future__ import annotations

import random
import uuid

from common.history import FAILED, OK, UNKNOWN, Final, Purchase, Reset


def concurrent_sale(*, stock: int, operations: int, clients: int, seed: int = 0, sku: str = "s",
                    unknown_share: float = 0.0, replay_share: float = 0.0,
                    final: bool = True) -> list:
    rng = random.Random(seed)
    now = [1_000] * clients
    planned = []  # (point, purchase)
    keys: list[str] = []
    for n in range(operations):
        client = n % clients
        invoke = now[client] + rng.randint(1, 50)
        complete = invoke + rng.randint(1, 400)
        now[client] = complete
        replay = keys and rng.random() < replay_share
        key = rng.choice(keys) if replay else uuid.UUID(int=rng.getrandbits(128)).hex
        keys.append(key)
        op = Purchase(n + 1, f"c{client}", sku, 1, key, invoke, complete)
        planned.append((rng.randint(invoke, complete), op))
    remaining, orders, order_ids = stock, {}, iter(range(1, 10 * operations))
    for _, op in sorted(planned, key=lambda p: p[0]):
        if op.key in orders:
            op.outcome, op.order_id, op.replayed = OK, orders[op.key], True
        elif remaining >= op.quantity:
            remaining -= op.quantity
            orders[op.key] = next(order_ids)
            op.outcome, op.order_id, op.remaining, op.status = OK, orders[op.key], remaining, 201
        else:
            op.outcome, op.status, op.error = FAILED, 409, "sold_out"
        if rng.random() < unknown_share:  # its answer lost on the way back
            op.outcome, op.status, op.error = UNKNOWN, 504, "timeout"
            op.order_id = op.remaining = None
            op.replayed = False
    ops = [op for _, op in planned]
    events: list = [Reset(sku, stock, 0)] + ops
    if final:
        events.append(Final(sku, remaining, sorted(orders.items()), max(now) + 1))
    return events
