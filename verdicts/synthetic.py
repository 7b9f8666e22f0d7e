"""Histories made up with a known answer, for the checker's tests and its benchmark.

``concurrent_sale`` lets ``clients`` buyers each send purchases one after another;
every purchase takes effect at a random instant inside its interval, and its answer
is what the sequential sale says at that instant: linearizable by construction. A
test breaks one answer to get a history that is not.
"""

from __future__ import annotations

import random
import uuid

from common.history import FAILED, OK, PAID, REFUNDED, UNKNOWN, Final, Pay, Purchase, Reset


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


def window_sale(*, stock: int, buyers: int, clients: int, window: int = 5_000, paying: float = 0.5,
                unknown_share: float = 0.0, unknown_payments: float = 0.0, lost_payments: float = 0.0,
                busy: float = 0.0, lag: int = 0, held: int = 0, seed: int = 0, sku: str = "s") -> list:
    """A sale with a payment window (``window`` in the history's nanoseconds), as
    ``concurrent_sale`` makes one: ``buyers`` purchases from ``clients`` buyers one
    after another; each order paid with probability ``paying``, at once or as it falls
    due; each unpaid one expires at a random instant past its window; every operation
    takes effect at a random instant inside its interval, and its answer is lost
    (unknown) with probability ``unknown_share`` (a purchase) or ``unknown_payments``.
    An unpaid order meets, with probability ``lost_payments``, a payment that never
    landed and whose answer was lost (a server away as it falls due). With probability
    ``busy`` a buyer's first try is refused as busy (nothing written) and the buyer
    tries again under the same key up to a window later. The expirer takes an order
    ``lag`` later than a window past its due (as one that sweeps now and then does).
    A payment is held up to ``held`` before it lands (a provider's delivery held up:
    paid as it falls due, it then lands late). Linearizable by construction."""
    rng = random.Random(seed)
    events: list = []
    planned = _purchases(rng, buyers, clients, window, busy, sku, events)  # (instant, kind, operation)
    remaining, order_ids, pay_ids = stock, iter(range(1, 10 * buyers)), iter(range(buyers + 1, 10**8))
    status, keys, later = {}, {}, []
    while planned:
        planned.sort(key=lambda p: p[0])
        point, kind, op = planned.pop(0)
        if kind == "buy":
            if remaining >= 1:
                remaining -= 1
                op.order_id = next(order_ids)
                status[op.order_id], keys[op.order_id] = "pending", op.key
                op.outcome, op.remaining, op.status = OK, remaining, 201
                planned.append((point + window + lag + rng.randint(0, window), "expire", op.order_id))
                _pay_for(op, rng, next(pay_ids), window, paying, lost_payments, held, planned, events)
            else:
                op.outcome, op.status, op.error = FAILED, 409, "sold_out"
            if rng.random() < unknown_share:
                op.outcome, op.status, op.error = UNKNOWN, 504, "timeout"
                op.order_id = op.remaining = None
            events.append(op)
        elif kind == "expire":
            later.append(point)
            if status[op] == "pending":
                status[op], remaining = "expired", remaining + 1
        else:
            if status[op.order_id] == "pending":
                op.result = PAID
            elif remaining >= 1:
                op.result, remaining = PAID, remaining - 1
            else:
                op.result = REFUNDED
            status[op.order_id], op.outcome = op.result, OK
            if unknown_payments and rng.random() < unknown_payments:  # the buyer never saw it land
                op.outcome, op.result, op.complete = UNKNOWN, None, None
            events.append(op)
    at = max([e.complete or e.invoke for e in events] + later) + 1
    orders = sorted((keys[o], o, s) for o, s in status.items())
    return [Reset(sku, stock, 0, window=window / 1e9), *events, Final(sku, remaining, orders, at)]


def paid_after_due(events: list, window: int) -> int:
    """How many payments in ``events`` landed after their order fell due: each leaves
    an expiry that may or may not have happened before it."""
    placed = {e.order_id: e.invoke for e in events if isinstance(e, Purchase) and e.outcome == OK}
    return sum(isinstance(e, Pay) and e.outcome == OK and e.complete > placed[e.order_id] + window
               for e in events)


def _purchases(rng: random.Random, buyers: int, clients: int, window: int, busy: float, sku: str,
               events: list) -> list:
    """Each buyer's purchase, planned at a random instant inside its interval; a try
    refused as busy before it, an event now."""
    now = [1_000] * clients
    planned = []
    for n in range(buyers):
        client = n % clients
        refused = None
        if busy and rng.random() < busy:  # (no draw when none are busy: the same histories as before)
            invoke = now[client] + rng.randint(1, 50)
            refused = (invoke, invoke + rng.randint(1, 50))
            now[client] = refused[1] + rng.randint(1, window)
        invoke = now[client] + rng.randint(1, 50)
        complete = invoke + rng.randint(1, 400)
        now[client] = complete
        op = Purchase(n + 1, f"c{client}", sku, 1, uuid.UUID(int=rng.getrandbits(128)).hex, invoke, complete)
        if refused:
            events.append(Purchase(10**8 + n, op.client, sku, 1, op.key, *refused, FAILED, 503, "busy"))
        planned.append((rng.randint(invoke, complete), "buy", op))
    return planned


def _pay_for(op: Purchase, rng: random.Random, pay_id: int, window: int, paying: float, lost: float,
             held: int, planned: list, events: list) -> None:
    """A payment for the order ``op`` placed, with probability ``paying``, at once or
    as it falls due (planned: it lands); else, with probability ``lost``, one that
    never landed and whose answer was lost (an event now: nothing plans it)."""
    if rng.random() < paying:
        start = op.complete + (rng.randint(0, window // 2) if rng.random() < 0.5
                               else window + rng.randint(-window // 5, window // 5))
        pay = Pay(pay_id, op.client, op.sku, op.order_id, start)
        pay.complete = start + rng.randint(1, 400) + (rng.randint(0, held) if held else 0)
        planned.append((rng.randint(pay.invoke, pay.complete), "pay", pay))
    elif lost and rng.random() < lost:  # (no draw when none are lost: the same histories as before)
        start = op.complete + window + rng.randint(-window // 5, window // 5)
        events.append(Pay(pay_id, op.client, op.sku, op.order_id, start, None, UNKNOWN))
