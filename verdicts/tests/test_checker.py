"""The checker on hand-made histories: sequential and concurrent, with and without
unknown outcomes, linearizable and not (each anomaly the issue names)."""

import pytest

from common.history import FAILED, OK, UNKNOWN, Final, Purchase, Reset
from verdicts.checker import check
from verdicts.synthetic import concurrent_sale

SKU = "s"


def buy(n, invoke, complete, *, key=None, outcome=OK, order=None, remaining=None, replayed=False,
        error=None, quantity=1):
    return Purchase(n, f"c{n}", SKU, quantity, key or f"k{n}", invoke, complete, outcome,
                    201 if outcome == OK else 0, error, order, remaining, replayed)


def sold_out(n, invoke, complete, key=None):
    return buy(n, invoke, complete, key=key, outcome=FAILED, error="sold_out")


def unknown(n, invoke, complete=None, key=None):
    return buy(n, invoke, complete, key=key, outcome=UNKNOWN, error="timeout")


def final(remaining, orders, at=1_000):
    return Final(SKU, remaining, orders, at)


def verdict(*events, stock=2, segments=1):
    return check([Reset(SKU, stock, 0, segments), *events]).skus[0]


def test_a_sequential_sale_is_linearizable():
    v = verdict(buy(1, 1, 2, order=1, remaining=1), buy(2, 3, 4, order=2, remaining=0), sold_out(3, 5, 6),
                final(0, [("k1", 1), ("k2", 2)]))
    assert v.linearizable and v.valid, v.anomalies


def test_overlapping_purchases_may_answer_in_either_order():
    # k1 answered last (0 left) but was invoked first: k2 took its unit in between.
    v = verdict(buy(1, 1, 10, order=1, remaining=0), buy(2, 2, 5, order=2, remaining=1))
    assert v.linearizable


def test_two_answers_with_the_same_remaining_cannot_be_ordered():
    v = verdict(buy(1, 1, 10, order=1, remaining=1), buy(2, 2, 5, order=2, remaining=1))
    assert v.linearizable is False
    assert v.window is not None and {op.id for op in v.window.ops} >= {1, 2}
    assert v.anomalies[0].kind == "not linearizable"


def test_more_orders_than_stock_is_not_linearizable_even_without_remaining():
    v = verdict(buy(1, 1, 10, order=1), buy(2, 2, 11, order=2), buy(3, 3, 12, order=3))
    assert v.linearizable is False


def test_sold_out_before_a_later_purchase_succeeds_means_stock_came_back():
    v = verdict(sold_out(1, 1, 2), buy(2, 3, 4, order=1, remaining=0), stock=1)
    assert v.linearizable is False
    assert v.window.stuck.id == 1  # the refusal comes first: nothing ordered before it explains it


def test_remaining_that_goes_up_between_two_answers_is_caught():
    v = verdict(buy(1, 1, 2, order=1, remaining=3), buy(2, 3, 4, order=2, remaining=4), stock=4)
    assert v.linearizable is False
    assert v.window.stuck.id == 2


def test_a_sold_out_concurrent_with_the_last_unit_is_fine():
    v = verdict(sold_out(1, 1, 10), buy(2, 2, 5, order=1, remaining=0), stock=1)
    assert v.linearizable


def test_an_unknown_purchase_may_have_taken_the_unit():
    history = [unknown(1, 1), sold_out(2, 5, 6)]
    assert verdict(*history, stock=1).linearizable
    # The final read decides: the order is there, so it took it...
    assert verdict(*history, final(0, [("k1", 9)]), stock=1).valid
    # ...or it is not, and the sold out was a lie with one unit left.
    v = verdict(*history, final(1, []), stock=1)
    assert v.linearizable is False and isinstance(v.window.stuck, Purchase) and v.window.stuck.id == 2


def test_an_unknown_purchase_may_have_done_nothing():
    v = verdict(unknown(1, 1, 3), buy(2, 4, 5, order=1, remaining=0), final(0, [("k2", 1)]), stock=1)
    assert v.valid


def test_a_replay_answers_the_keys_first_order():
    first = buy(1, 1, 2, key="a", order=7, remaining=1)
    assert verdict(first, buy(2, 3, 4, key="a", order=7, replayed=True), final(1, [("a", 7)])).valid
    v = verdict(first, buy(2, 3, 4, key="a", order=8, replayed=True))
    assert v.linearizable is False


def test_a_replay_of_an_order_nobody_placed_is_caught():
    v = verdict(buy(1, 1, 2, key="a", order=7, replayed=True))
    assert v.linearizable is False


def test_a_timeout_then_a_replay_means_the_first_try_placed_it():
    v = verdict(unknown(1, 1, 3, key="a"), buy(2, 4, 5, key="a", order=7, replayed=True),
                buy(3, 6, 7, order=8, remaining=0), final(0, [("a", 7), ("k3", 8)]))
    assert v.valid
    # The replay proves the unit taken: a later purchase cannot find two left.
    v = verdict(unknown(1, 1, 3, key="a"), buy(2, 4, 5, key="a", order=7, replayed=True),
                buy(3, 6, 7, order=8, remaining=1))
    assert v.linearizable is False


def test_a_second_201_for_a_key_is_a_second_order():
    v = verdict(buy(1, 1, 2, key="a", order=7, remaining=1), buy(2, 3, 4, key="a", order=8, remaining=0))
    assert v.linearizable is False


def test_the_final_read_must_match_the_answers():
    acknowledged = buy(1, 1, 2, order=1, remaining=1)
    lost = verdict(acknowledged, final(2, []))
    assert {a.kind for a in lost.anomalies} >= {"lost", "not linearizable"}
    refused = buy(2, 3, 4, outcome=FAILED, error="busy")
    unexpected = verdict(acknowledged, refused, final(0, [("k1", 1), ("k2", 5)]))
    assert "unexpected" in {a.kind for a in unexpected.anomalies}
    twice = verdict(acknowledged, final(0, [("k1", 1), ("k1", 2)]))
    assert "duplicated" in {a.kind for a in twice.anomalies}


def test_a_refusal_that_wrote_nothing_is_left_out_of_the_search():
    v = verdict(buy(1, 1, 2, outcome=FAILED, error="busy"), buy(2, 3, 4, order=1, remaining=1),
                final(1, [("k2", 1)]))
    assert v.valid


def test_segmented_stock_answers_what_its_segments_have_left():
    # Two segments of 2: the second order's segment may hold 1 while the product holds 2.
    v = verdict(buy(1, 1, 2, order=1, remaining=1), buy(2, 3, 4, order=2, remaining=1), stock=4,
                segments=2)
    assert v.linearizable
    assert verdict(buy(1, 1, 2, order=1, remaining=1), buy(2, 3, 4, order=2, remaining=1),
                   stock=4).linearizable is False
    assert verdict(buy(1, 1, 2, order=1, remaining=4), stock=4, segments=2).linearizable is False


def test_skus_are_checked_apart():
    other = [Reset("t", 1, 0), Purchase(9, "c9", "t", 1, "x", 1, 2, OK, 201, None, 5, 0)]
    result = check([Reset(SKU, 1, 0), buy(1, 1, 2, order=1, remaining=0), *other])
    assert [v.sku for v in result.skus] == ["s", "t"] and result.valid


@pytest.mark.parametrize("unknown_share", [0.0, 0.02])
def test_a_large_concurrent_linearizable_history_passes(unknown_share):
    events = concurrent_sale(stock=3_000, operations=5_000, clients=24, seed=7, unknown_share=unknown_share,
                             replay_share=0.05)
    result = check(events)
    assert result.valid, result.anomalies[:1]


def test_one_broken_answer_in_a_large_history_is_found():
    events = concurrent_sale(stock=3_000, operations=5_000, clients=24, seed=7)
    acknowledged = [e for e in events if isinstance(e, Purchase) and e.outcome == OK and e.remaining]
    wrong = acknowledged[len(acknowledged) // 2]
    wrong.remaining += 5  # as if its stock count had been lost
    result = check(events)
    assert result.valid is False
    window = result.skus[0].window
    assert wrong in window.ops


def test_a_purchase_of_less_than_one_unit_is_refused_as_malformed():
    for quantity in (0, -1):
        v = verdict(buy(1, 1, 2, order=1, remaining=3, quantity=quantity), final(3, [("k1", 1)]))
        assert v.linearizable is None and not v.valid
        assert [a.kind for a in v.anomalies] == ["malformed"]
        assert "less than one unit" in v.anomalies[0].detail
    assert check([Reset(SKU, 2, 0), buy(1, 1, 2, order=1, remaining=3, quantity=-1)]).valid is False


@pytest.mark.parametrize("in_flight", [
    buy(2, 3, 20, order=2, remaining=0),  # a 201 answered after the read was taken
    buy(2, 10, 11, order=2, remaining=0),  # invoked once the read was taken
    unknown(2, 3, 10),  # given up on at the read's instant: it may land after it
], ids=["answered-after", "invoked-after", "unknown-overlapping"])
def test_a_final_read_that_overlaps_an_operation_is_refused_as_malformed(in_flight):
    v = verdict(buy(1, 1, 2, order=1, remaining=1), in_flight, final(1, [("k1", 1)], at=10))
    assert v.linearizable is None and not v.valid
    assert [a.kind for a in v.anomalies] == ["malformed"]
    assert "overlaps 1 operations" in v.anomalies[0].detail
    # The same history with the read after everything: judged, not refused.
    after = verdict(buy(1, 1, 2, order=1, remaining=1), in_flight, final(1, [("k1", 1)], at=30))
    assert "malformed" not in {a.kind for a in after.anomalies}


@pytest.mark.parametrize("stock", [100, 1_000, 2_500, 4_000])
@pytest.mark.parametrize("seed", range(3))
def test_a_failovers_history_is_searched_in_about_one_state_an_operation(stock, seed):
    """5,000 purchases from 32 overlapping buyers, 5 % of the answers lost, no final
    read (what a failover leaves): the stock's bound settles each unknown purchase at
    the next 201, so the search caches about one state an operation (without it, many
    more: ``python -m benchmarks.checker --plain``)."""
    events = concurrent_sale(stock=stock, operations=5_000, clients=32, seed=seed, unknown_share=0.05,
                             final=False)
    verdict = check(events).skus[0]
    assert verdict.linearizable is True
    assert verdict.searched < 2 * 5_000, verdict.searched


@pytest.mark.parametrize(("operations", "stock", "before"), [(1_000, 100, 181_546), (5_000, 1_000, 300_000)])
def test_many_concurrent_sold_outs_after_unknown_purchases_do_not_stall_the_search(operations, stock, before):
    """32 overlapping clients, 5 % of the answers lost, no final read: the search used
    to try the sold_outs around each completion in every order (``before`` states, the
    second past a 300,000-state budget); a sold_out the stock allows is ordered at once."""
    events = concurrent_sale(stock=stock, operations=operations, clients=32, seed=1, unknown_share=0.05,
                             final=False)
    verdict = check(events, budget_states=300_000).skus[0]
    assert verdict.linearizable is True
    assert verdict.searched < before // 5, verdict.searched
