"""The checker on sales with a payment window: expiries return units, payments keep
them or take them back, and the final read's statuses say which happened. Each
pitfall of issue 55 as a history: linearizable when the sale did it right, not when
a unit was sold twice, returned twice, or a late payment lied."""

from dataclasses import replace

import pytest

from common.history import FAILED, OK, PAID, REFUNDED, UNKNOWN, Final, Pay, Purchase, Reset
from verdicts.checker import check
from verdicts.synthetic import paid_after_due, window_sale

SKU = "s"
WINDOW_NS = 100  # the window, in the histories' nanoseconds


def buy(n, invoke, complete, *, order=None, remaining=None, outcome=OK, error=None, key=None):
    return Purchase(n, f"c{n}", SKU, 1, key or f"k{n}", invoke, complete, outcome,
                    201 if outcome == OK else 0, error, order, remaining)


def sold_out(n, invoke, complete):
    return buy(n, invoke, complete, outcome=FAILED, error="sold_out")


def pay(n, order, invoke, complete=None, result=PAID):
    return Pay(n, f"p{n}", SKU, order, invoke, complete, OK if complete is not None else UNKNOWN,
               result if complete is not None else None)


def final(remaining, *orders, at=10_000):
    return Final(SKU, remaining, list(orders), at)


def verdict(*events, stock=1):
    return check([Reset(SKU, stock, 0, window=WINDOW_NS / 1e9), *events]).skus[0]


def test_an_expired_unit_sells_again():
    v = verdict(buy(1, 1, 2, order=1, remaining=0), sold_out(2, 3, 4),
                buy(3, 200, 201, order=2, remaining=0),
                final(0, ("k1", 1, "expired"), ("k3", 2, "pending")))
    assert v.valid, v.anomalies


def test_a_unit_cannot_sell_again_before_its_order_is_due():
    # k3 bought the only unit 50 after k1 did: k1's window had not passed.
    v = verdict(buy(1, 1, 2, order=1, remaining=0), buy(3, 50, 51, order=2, remaining=0),
                final(0, ("k1", 1, "expired"), ("k3", 2, "pending")))
    assert v.linearizable is False
    assert v.window.stuck.id == 3


def test_an_order_falls_due_a_window_after_the_try_that_placed_it():
    # k1's first try was refused as busy at 1; its retry placed the order at 150, so
    # the unit cannot sell again at 200 (due at 250), though 200 is a window past 1.
    busy = buy(1, 1, 2, outcome=FAILED, error="busy")
    early = verdict(busy, buy(2, 150, 151, order=1, remaining=0, key="k1"),
                    buy(3, 200, 201, order=2, remaining=0),
                    final(0, ("k1", 1, "expired"), ("k3", 2, "pending")))
    assert early.linearizable is False
    assert early.window.stuck.id == 3
    due = verdict(busy, buy(2, 150, 151, order=1, remaining=0, key="k1"),
                  buy(3, 260, 261, order=2, remaining=0),
                  final(0, ("k1", 1, "expired"), ("k3", 2, "pending")))
    assert due.valid, due.anomalies


def test_an_order_expired_at_the_end_gave_its_unit_back():
    v = verdict(buy(1, 1, 2, order=1, remaining=0), final(0, ("k1", 1, "expired")))
    assert v.linearizable is False
    assert [a.kind for a in v.anomalies] == ["not linearizable", "unaccounted"]


def test_a_unit_returned_and_still_paid_is_sold_twice():
    # Saleor's race: paid and expired at once, the unit resold.
    v = verdict(buy(1, 1, 2, order=1, remaining=0), pay(1, 1, 150, 160),
                buy(3, 200, 201, order=2, remaining=0),
                final(0, ("k1", 1, "paid"), ("k3", 2, "pending")))
    assert v.linearizable is False
    assert "unaccounted" in [a.kind for a in v.anomalies]


def test_a_payment_in_time_keeps_the_unit():
    v = verdict(buy(1, 1, 2, order=1, remaining=0), pay(1, 1, 10, 20), sold_out(3, 300, 301),
                final(0, ("k1", 1, "paid")))
    assert v.valid, v.anomalies


def test_a_late_payment_takes_its_unit_back_while_one_is_left():
    v = verdict(buy(1, 1, 2, order=1, remaining=0), pay(1, 1, 300, 310), sold_out(3, 400, 401),
                final(0, ("k1", 1, "paid")))
    assert v.valid, v.anomalies


def test_a_late_payment_that_took_a_resold_unit_oversells():
    # codingXiaxw/seckill#41: paid after its unit went back and sold again.
    v = verdict(buy(1, 1, 2, order=1, remaining=0), buy(3, 200, 201, order=2, remaining=0),
                pay(2, 2, 210, 220), pay(1, 1, 300, 310), final(0, ("k1", 1, "paid"), ("k3", 2, "paid")))
    assert v.linearizable is False
    assert {a.kind for a in v.anomalies} >= {"not linearizable", "unaccounted", "oversold"}


def test_a_late_payment_with_nothing_left_is_refunded():
    v = verdict(buy(1, 1, 2, order=1, remaining=0), buy(3, 200, 201, order=2, remaining=0),
                pay(1, 1, 300, 310, result=REFUNDED),
                final(0, ("k1", 1, "refunded"), ("k3", 2, "pending")))
    assert v.valid, v.anomalies


def test_a_refund_while_a_unit_was_left_is_a_lie():
    # pretix re-checks the quota; a refund says it found none, so none may be left.
    v = verdict(buy(1, 1, 2, order=1, remaining=0), pay(1, 1, 300, 310, result=REFUNDED),
                sold_out(3, 400, 401), final(1, ("k1", 1, "refunded")))
    assert v.linearizable is False


def test_a_payment_racing_the_expiry_may_land_either_side():
    # The payment's interval spans the due time: in time, or late with the unit back.
    v = verdict(buy(1, 1, 2, order=1, remaining=0), pay(1, 1, 90, 130), final(0, ("k1", 1, "paid")))
    assert v.valid, v.anomalies


def test_a_payment_whose_end_was_never_seen_may_have_landed():
    paid = verdict(buy(1, 1, 2, order=1, remaining=0), pay(1, 1, 300), final(0, ("k1", 1, "paid")))
    not_paid = verdict(buy(1, 1, 2, order=1, remaining=0), pay(1, 1, 300), final(1, ("k1", 1, "expired")))
    assert paid.valid and not_paid.valid, (paid.anomalies, not_paid.anomalies)


def test_a_pending_order_keeps_its_unit():
    v = verdict(buy(1, 1, 2, order=1, remaining=0), final(1, ("k1", 1, "pending")))
    assert v.linearizable is False
    assert "unaccounted" in [a.kind for a in v.anomalies]


def test_stock_that_comes_back_lets_a_201_say_more_is_left_than_the_purchases_took():
    # The stock's bound counts returns still to come: 2 sold, 1 back, then 1 left.
    v = verdict(buy(1, 1, 2, order=1, remaining=1), buy(2, 3, 4, order=2, remaining=0),
                buy(3, 300, 301, order=3, remaining=0), buy(4, 400, 401, order=4, remaining=0),
                final(0, ("k1", 1, "expired"), ("k2", 2, "expired"), ("k3", 3, "pending"),
                      ("k4", 4, "pending")), stock=2)
    assert v.valid, v.anomalies


def test_an_unknown_purchase_of_a_window_sale_is_settled_by_its_status():
    v = verdict(buy(1, 1, 2, order=None, outcome=UNKNOWN, error="timeout"),
                buy(2, 300, 301, order=2, remaining=0),
                final(0, ("k1", 1, "expired"), ("k2", 2, "pending")))
    assert v.valid, v.anomalies


def test_a_replay_keeps_what_the_other_orders_are_at():
    # A Redis restart answers outcome_unknown; the retry is a 200 replay. Order 2, bought
    # and paid before it, is still pending-then-paid for the search: a replay changes
    # no order's status.
    v = verdict(buy(1, 1, 2, order=None, outcome=UNKNOWN, error="outcome_unknown"),
                buy(2, 3, 4, order=2, remaining=0),
                replace(buy(3, 5, 6, order=1, key="k1"), status=200, replayed=True),
                pay(2, 2, 7, 8), sold_out(4, 9, 10),
                final(0, ("k1", 1, "pending"), ("k2", 2, "paid")), stock=2)
    assert v.valid, v.anomalies


def test_payments_need_a_window_and_statuses():
    no_window = check([Reset(SKU, 1, 0), buy(1, 1, 2, order=1, remaining=0), pay(1, 1, 10, 20),
                       final(0, ("k1", 1))]).skus[0]
    no_status = verdict(buy(1, 1, 2, order=1, remaining=0), final(0, ("k1", 1)))
    stray = verdict(buy(1, 1, 2, order=1, remaining=0), pay(1, 9, 10, 20), final(0, ("k1", 1, "pending")))
    for v in (no_window, no_status, stray):
        assert [a.kind for a in v.anomalies] == ["malformed"]
        assert not v.valid


@pytest.mark.parametrize("unknown_share", [0.0, 0.1])
def test_a_sale_the_size_of_a_verdict_cell_is_checked_in_a_few_states_an_operation(unknown_share):
    events = window_sale(stock=60, buyers=460, clients=16, unknown_share=unknown_share, seed=1)
    operations = len(events) - 2
    v = check(events).skus[0]
    assert v.valid, v.anomalies[:1]
    assert v.searched < 50 * operations  # expiries of unpaid orders are alike: no subsets of them
    statuses = {status for *_, status in events[-1].orders}
    assert {"paid", "expired"} <= statuses
    broken = [*events[:-1], replace(events[-1], remaining=events[-1].remaining + 1)]
    assert check(broken).skus[0].linearizable is False


def test_payments_lost_as_orders_fell_due_cost_the_search_no_subsets_of_them():
    # MariaDB restarted as the first wave fell due: half the unpaid orders met a
    # payment whose answer was lost and which never landed. Each such order expired
    # by the end; were its payment tried as landed and not, its expiry would not be
    # alike with the others', and the search would spend any budget on the subsets of
    # them before the second wave's 201s.
    events = window_sale(stock=60, buyers=460, clients=16, lost_payments=0.5, seed=1)
    operations = len(events) - 2
    lost = [e for e in events if isinstance(e, Pay) and e.outcome == UNKNOWN]
    assert len(lost) >= 10
    v = check(events, budget_states=100 * operations).skus[0]
    assert v.linearizable is True, v.anomalies[:1]
    broken = [*events[:-1], replace(events[-1], remaining=events[-1].remaining + 1)]
    assert check(broken).skus[0].linearizable is False


def test_an_expirer_that_comes_late_costs_the_search_no_subsets_of_its_expiries():
    # The sale sells out, its orders fall due, and the expirer sweeps a while later:
    # the sold_outs of that while saw no unit back. Each expiry is tried after what
    # the clients saw, so none is placed before them in every subset.
    events = window_sale(stock=60, buyers=460, clients=16, lag=5_000, seed=1)
    operations = len(events) - 2
    v = check(events).skus[0]
    assert v.linearizable is True, v.anomalies[:1]
    assert v.searched < 2 * operations
    broken = [*events[:-1], replace(events[-1], remaining=events[-1].remaining - 1)]
    assert check(broken).skus[0].linearizable is False


def test_payments_of_pending_orders_cost_the_search_no_orders_of_them():
    # A payment that finds its order pending moves nothing any other operation sees:
    # ordered at once, it spares the search each order of it among the others.
    events = window_sale(stock=60, buyers=460, clients=16, lost_payments=0.3, seed=20)
    operations = len(events) - 2
    v = check(events, budget_states=150 * operations).skus[0]
    assert v.linearizable is True, v.anomalies[:1]
    broken = [*events[:-1], replace(events[-1], remaining=events[-1].remaining - 1)]
    assert check(broken).skus[0].linearizable is False


@pytest.mark.parametrize(("held", "seed"), [(1_000, 2), (1_000, 8), (1_000, 9), (2_000, 0)])
def test_payments_held_up_past_their_due_cost_the_search_no_subsets_of_their_expiries(held, seed):
    # A webhook storm: deliveries held up, so many orders are paid after they fall
    # due, each expiry "maybe" (before the payment, which took the units back, or not
    # at all). Tried as "nothing" before the payment as well as after it, and with no
    # ceiling on the units, the search spends far more than this budget on these seeds.
    events = window_sale(stock=60, buyers=460, clients=16, held=held, seed=seed)
    operations = len(events) - 2
    assert paid_after_due(events, 5_000) >= 5
    v = check(events, budget_states=20 * operations).skus[0]
    assert v.linearizable is True, v.anomalies[:1]
    for broken in ([*events[:-1], replace(events[-1], remaining=events[-1].remaining + 1)],
                   [*events[:-1], replace(events[-1], remaining=events[-1].remaining - 1)]):
        assert check(broken).skus[0].linearizable is False


def test_a_payment_answered_paid_for_an_order_not_paid_at_the_end_was_lost():
    v = verdict(buy(1, 1, 2, order=1, remaining=0), pay(1, 1, 10, 20), final(0, ("k1", 1, "pending")))
    assert [a.kind for a in v.anomalies] == ["not linearizable", "payment lost"]


def test_an_order_paid_without_a_payment_is_no_state_of_the_sale():
    v = verdict(buy(1, 1, 2, order=1, remaining=0), final(0, ("k1", 1, "paid")))
    assert v.linearizable is False
    assert [a.kind for a in v.anomalies] == ["not linearizable", "paid unpaid"]


def test_an_order_without_a_payment_step_in_a_window_sale_is_no_state_of_it():
    # The reset's old bug: a purchase that checked the old terms (no payment step)
    # placed its order in the new sale, which has a window.
    v = verdict(buy(1, 1, 2, order=1, remaining=0), final(0, ("k1", 1, "placed")))
    assert v.linearizable is False
    assert "no payment step" in [a.kind for a in v.anomalies]
