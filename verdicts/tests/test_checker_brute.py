"""The checker against brute force, on small random histories: every subset of the
unknown purchases that may have taken effect, every order of the operations that
their intervals allow, replayed on the sequential sale by hand. The two must agree
on every history, linearizable or not."""

import itertools
import random

import pytest

from common.history import FAILED, OK, PAID, REFUNDED, UNKNOWN, Final, Pay, Purchase, Reset
from verdicts.checker import check
from verdicts.synthetic import window_sale

SKU = "s"


def _history(rng: random.Random) -> tuple[int, list]:
    """A sale run sequentially at random instants inside each operation's interval,
    some answers then made unknown, and sometimes one answer or the final read
    broken: about half of them linearizable."""
    stock, count = rng.randint(1, 3), rng.randint(2, 5)
    points = sorted(rng.sample(range(10, 200), count))
    left, ops, placed = stock, [], []
    for n, point in enumerate(points, 1):
        quantity = rng.choice((1, 1, 2))
        invoke, complete = point - rng.randint(0, 30), point + rng.randint(0, 30)
        if left >= quantity:
            left -= quantity
            op = Purchase(n, f"c{n}", SKU, quantity, f"k{n}", invoke, complete, OK, 201, None, n, left)
            placed.append((op.key, n))
        else:
            op = Purchase(n, f"c{n}", SKU, quantity, f"k{n}", invoke, complete, FAILED, 409, "sold_out")
        if rng.random() < 0.25:  # the answer never came
            op.outcome, op.status, op.error, op.order_id, op.remaining = UNKNOWN, 0, "timeout", None, None
        ops.append(op)
    final = None
    if rng.random() < 0.7:
        final = Final(SKU, left, list(placed), max(op.complete for op in ops) + 1)
    if rng.random() < 0.5:  # one thing broken
        answered = [op for op in ops if op.outcome == OK]
        choice = rng.randrange(3)
        if choice == 0 and answered:
            rng.choice(answered).remaining += rng.choice((-1, 1))
        elif choice == 1 and answered:
            op = rng.choice(answered)
            op.outcome, op.status, op.error, op.order_id, op.remaining = FAILED, 409, "sold_out", None, None
        elif final is not None:
            final.remaining += rng.choice((-1, 1))
    return stock, [*ops, *([final] if final else [])]


def _brute_force(stock: int, events: list) -> bool:
    final = next((e for e in events if isinstance(e, Final)), None)
    purchases = [e for e in events if isinstance(e, Purchase)]
    unknown = [op for op in purchases if op.outcome == UNKNOWN]
    horizon = final.at if final else 10**9  # an unknown purchase lands, if at all, before the read

    def interval(e) -> tuple[int, int]:
        if isinstance(e, Final):
            return e.at, e.at + 1
        return e.invoke, (horizon - 1 if e.outcome == UNKNOWN else e.complete)

    for size in range(len(unknown) + 1):
        for landed in itertools.combinations(unknown, size):
            ops = [op for op in purchases if op.outcome != UNKNOWN] + list(landed)
            if final is not None:
                keys = {op.key for op in ops if op.outcome != FAILED}
                if keys != {key for key, _ in final.orders}:
                    continue
                ops.append(final)
            for order in itertools.permutations(ops):
                if any(interval(b)[1] < interval(a)[0] for i, a in enumerate(order) for b in order[i + 1:]):
                    continue  # b completed before a was invoked, yet comes after it
                if _replays(stock, order):
                    return True
    return False


def _replays(stock: int, order) -> bool:
    left = stock
    for e in order:
        if isinstance(e, Final):
            if left != e.remaining:
                return False
        elif e.outcome == FAILED:
            if left >= e.quantity:
                return False
        else:
            if left < e.quantity:
                return False
            left -= e.quantity
            if e.outcome == OK and e.remaining != left:
                return False
    return True


@pytest.mark.parametrize("seed", range(20))
def test_the_checker_agrees_with_brute_force_on_small_histories(seed):
    rng = random.Random(seed)
    seen = set()
    for _ in range(40):
        stock, events = _history(rng)
        verdict = check([Reset(SKU, stock, 0), *events]).skus[0]
        expected = _brute_force(stock, events)
        assert verdict.valid is expected, (stock, events, verdict.anomalies)
        seen.add(expected)
    assert seen == {True, False}  # both kinds were generated


# With a payment window: expiries and payments too. The oracle tries every order of
# every operation, each expiry of an order in the final read and each unknown
# operation landed or not, on the sale with statuses written out again by hand.

WINDOW = 60  # nanoseconds, the histories' unit


def _window_history(rng: random.Random, lost_payments: float = 0.0, busy: float = 0.0) -> tuple[int, list]:
    """A small sale with a window (``verdicts.synthetic.window_sale``: purchases, some
    orders paid, at once or as they fall due, the others expiring, some answers
    unknown), and sometimes one answer, status or the read broken."""
    stock = rng.randint(1, 2)
    buyers = rng.randint(2, 5)
    reset, *ops, final = window_sale(stock=stock, buyers=buyers, clients=buyers, window=WINDOW,
                                     unknown_share=0.2, unknown_payments=0.2, lost_payments=lost_payments,
                                     busy=busy, seed=rng.getrandbits(32))
    if rng.random() < 0.5:  # one thing broken
        choice = rng.randrange(3)
        if choice == 0:
            final.remaining += rng.choice((-1, 1))
        elif choice == 1 and final.orders:
            i = rng.randrange(len(final.orders))
            key, order_id, was = final.orders[i]
            other = rng.choice([s for s in ("pending", "paid", "expired") if s != was])
            final.orders[i] = (key, order_id, other)
        elif paid := [op for op in ops if isinstance(op, Pay) and op.outcome == OK]:
            op = rng.choice(paid)
            op.result = REFUNDED if op.result == PAID else PAID
    return stock, [*ops, final]


def _brute_force_window(stock: int, events: list) -> bool:
    final = events[-1]
    ops = [e for e in events if not isinstance(e, Final)]
    first = {}
    for op in ops:
        if isinstance(op, Purchase):
            first[op.key] = min(first.get(op.key, op.invoke), op.invoke)
    # An order falls due a window after the purchase that placed it began: the one
    # answered 201 with it, or, if none was, the key's first.
    placed_by = {op.order_id: op.invoke for op in ops
                 if isinstance(op, Purchase) and op.outcome == OK and not op.replayed}
    expiries = [("expire", order_id, placed_by.get(order_id, first[key]) + WINDOW)
                for key, order_id, _ in final.orders]
    at_end = {key: order_id for key, order_id, _ in final.orders}
    todo = [(op, op.invoke, op.complete if op.outcome != UNKNOWN else final.at - 1,
             op.outcome == UNKNOWN) for op in ops if op.outcome != FAILED or op.error == "sold_out"]
    todo += [(e, e[2], final.at - 1, True) for e in expiries]

    def apply(op, left, status):
        """The state after ``op`` takes effect, or None if it cannot."""
        status = dict(status)
        if isinstance(op, tuple):  # an expiry
            if status.get(op[1]) != "pending":
                return None
            status[op[1]] = "expired"
            return left + 1, status
        if isinstance(op, Pay):
            was = status.get(op.order_id)
            if was == "pending":
                result = PAID
            elif was == "expired":
                result = PAID if left >= 1 else REFUNDED
                left -= result == PAID
            else:
                return None
            if op.outcome == OK and op.result != result:
                return None
            status[op.order_id] = result
            return left, status
        if op.outcome == FAILED:
            return (left, status) if left < 1 else None
        order_id = op.order_id if op.outcome == OK else at_end.get(op.key)
        if left < 1 or order_id is None or order_id in status:
            return None
        if op.outcome == OK and op.remaining != left - 1:
            return None
        status[order_id] = "pending"
        return left - 1, status

    # Every order is tried; a state (what is left to place, the stock left, the
    # statuses) that led nowhere once is not searched again.
    dead = set()

    def search(rest: frozenset, left, status) -> bool:
        if not rest:
            return left == final.remaining and status == {o: s for _, o, s in final.orders}
        state = (rest, left, frozenset(status.items()))
        if state in dead:
            return False
        earliest_end = min(todo[i][2] for i in rest)
        for i in rest:
            op, invoke, _, optional = todo[i]
            if invoke > earliest_end:
                continue  # something completed before it began must come first
            after = apply(op, left, status)
            if after is not None and search(rest - {i}, *after):
                return True
            if optional and search(rest - {i}, left, status):
                return True
        dead.add(state)
        return False

    return search(frozenset(range(len(todo))), stock, {})


@pytest.mark.parametrize("seed", range(20))
def test_the_checker_agrees_with_brute_force_on_small_sales_with_a_window(seed):
    _agrees(random.Random(1000 + seed))


@pytest.mark.parametrize("seed", range(3))
def test_the_checker_agrees_with_brute_force_when_payments_were_lost_as_orders_fell_due(seed):
    # Payments that never landed and whose answers were lost: the checker leaves
    # those of orders pending or expired at the end out; the oracle tries them all.
    _agrees(random.Random(2000 + seed), lost_payments=0.5)


@pytest.mark.parametrize("seed", range(3))
def test_the_checker_agrees_with_brute_force_when_buyers_tried_again_after_a_busy_refusal(seed):
    # The retry, under the same key, places the order: it falls due a window after
    # the retry began, not after the first try.
    _agrees(random.Random(3000 + seed), busy=0.5)


def _agrees(rng: random.Random, lost_payments: float = 0.0, busy: float = 0.0) -> None:
    seen = set()
    for _ in range(30):
        stock, events = _window_history(rng, lost_payments, busy)
        verdict = check([Reset(SKU, stock, 0, window=WINDOW / 1e9), *events]).skus[0]
        expected = _brute_force_window(stock, events)
        assert verdict.valid is expected, (stock, events, verdict.anomalies)
        seen.add(expected)
    assert seen == {True, False}
