"""The checker against brute force, on small random histories: every subset of the
unknown purchases that may have taken effect, every order of the operations that
their intervals allow, replayed on the sequential sale by hand. The two must agree
on every history, linearizable or not."""

import itertools
import random

import pytest

from common.history import FAILED, OK, UNKNOWN, Final, Purchase, Reset
from verdicts.checker import check

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
