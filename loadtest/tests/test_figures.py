"""The runner's arithmetic, on small hand-made runs whose figures are known."""

import dataclasses
import math
from pathlib import Path

import pytest

from loadtest.figures import (
    HotRow,
    Row,
    audits_combined,
    fifo_score,
    gate,
    median_figures,
    most_in_flight,
    opening_figures,
    parse_locust_stats,
    percentile,
    requests_per_tick,
    run_figures,
    served_by_arrival,
    server_timing,
)

FIXTURES = Path(__file__).parent / "fixtures"

# A sale of 3 units: t=0..2 s. Orders end at 0.5, 1.0 and 1.5 s; rejections after.
RUN = [
    (0.0, 0.5, "created"),
    (0.1, 1.0, "created"),
    (0.2, 0.3, "busy"),
    (0.3, 1.5, "created"),
    (0.4, 0.6, "replayed"),
    (1.6, 1.7, "sold_out"),
    (1.7, 1.8, "sold_out"),
    (1.8, 2.0, "sold_out"),
    (1.9, 2.0, "error"),
]
AUDIT = {"orders": 3, "oversold": 0, "lost_updates": 0, "consistent": True, "retries": 2}


def test_parse_locust_stats_reads_the_aggregated_row():
    totals = parse_locust_stats(FIXTURES / "run_stats.csv")
    assert (totals.requests, totals.failures) == (10, 1)
    assert totals.requests_per_s == pytest.approx(100.2)
    assert (totals.p50_ms, totals.p95_ms, totals.p99_ms) == (110, 400, 400)


def test_parse_locust_stats_without_aggregated_row_is_an_error(tmp_path):
    path = tmp_path / "x_stats.csv"
    path.write_text((FIXTURES / "run_stats.csv").read_text().rsplit("\n", 2)[0] + "\n")
    with pytest.raises(ValueError, match="no Aggregated row"):
        parse_locust_stats(path)


def test_percentile_is_nearest_rank():
    assert percentile([5, 1, 3, 2, 4], 50) == 3
    assert percentile([5, 1, 3, 2, 4], 99) == 5
    assert percentile([7], 95) == 7
    assert math.isnan(percentile([], 50))


def test_run_figures_counts_outcomes_and_times_the_sale():
    f = run_figures(RUN, AUDIT)
    assert (f.attempts, f.created, f.replayed, f.sold_out, f.busy, f.errors) == (9, 3, 1, 3, 1, 1)
    assert f.seconds == pytest.approx(2.0)
    assert f.throughput == pytest.approx(4.5)
    assert f.sell_out_seconds == pytest.approx(1.0)  # 0.5 → 1.5
    assert f.orders_per_s == pytest.approx(3.0)
    # Answers that started after the last order (1.5 s): 4 in the 0.5 s left.
    assert f.rejections_per_s == pytest.approx(8.0)
    assert (f.ok_p50_ms, f.ok_p99_ms) == pytest.approx((900, 1200))  # 500, 900, 1200 ms
    assert (f.rejected_p50_ms, f.rejected_p99_ms) == pytest.approx((100, 200))
    assert (f.orders, f.retries, f.consistent) == (3, 2, True)


def test_run_figures_of_a_run_that_never_sold():
    f = run_figures([(0.0, 0.1, "sold_out"), (0.1, 0.3, "sold_out")])
    assert f.created == 0
    assert math.isnan(f.sell_out_seconds) and math.isnan(f.orders_per_s)
    assert math.isnan(f.rejections_per_s) and math.isnan(f.ok_p50_ms)


def test_median_figures_takes_medians_and_all_of_the_booleans():
    a = run_figures(RUN, AUDIT)
    b = run_figures(RUN[:4], {**AUDIT, "consistent": False})
    c = run_figures(RUN[:6], AUDIT)
    m = median_figures([a, b, c])
    assert m.attempts == 6  # median of 9, 4, 6
    assert m.consistent is False
    assert isinstance(m.created, int)


def row(label, claims, **audit):
    figures = run_figures(RUN, {**AUDIT, **audit})
    return Row(label=label, strategy=label, claims_correct=claims, fast_path=True,
               median=figures, rounds=[run_figures(RUN, AUDIT), figures])


def test_gate_names_correct_claimers_that_broke_in_any_round():
    rows = [
        row("none", False, oversold=50, lost_updates=60, consistent=False),  # expected to break
        row("atomic", True),
        row("setnx", True, oversold=1, lost_updates=1, consistent=False),
        row("mysql", True, lost_updates=-2, consistent=False),
    ]
    broken = gate(rows)
    assert len(broken) == 2
    assert broken[0].startswith("setnx: oversold 1, lost updates 1")
    assert broken[1].startswith("mysql: oversold 0, lost updates 2")
    assert gate(rows[:2]) == []


def test_server_timing_reads_each_metrics_duration():
    assert server_timing("lock-wait;dur=0.125, hold;dur=2.5") == {"lock-wait": 0.125, "hold": 2.5}
    assert server_timing('db;desc="x";dur=3') == {"db": 3.0}
    assert server_timing("hold;dur=abc, cache") == {}
    assert server_timing(None) == {}


def test_server_timing_reads_a_number_in_a_description_without_duration():
    assert server_timing("hold;dur=2.5, arrival;desc=1763890000.123456") == {
        "hold": 2.5, "arrival": 1763890000.123456}
    assert server_timing('arrival;desc="17.5"') == {"arrival": 17.5}
    assert server_timing("arrival;desc=soon, x;desc=nan") == {}


# Five purchases, the third and the fifth a replayed key and an unstamped answer;
# columns: start, end, outcome, lock wait, hold, arrival. Sent in one order,
# arrived in another (the arrival decides).
ARRIVED = [
    (0.0, 0.4, "created", 1.0, 1.0, 10.003),
    (0.0, 0.2, "sold_out", None, None, 10.001),
    (0.1, 0.2, "replayed", None, None, 10.000),
    (0.1, 0.3, "created", 1.0, 1.0, 10.002),
    (0.2, 0.3, "created"),
    (0.2, 0.5, "busy", 5000.0, None, 10.004),
]


def test_served_by_arrival_ranks_stamped_purchases_and_leaves_replays_out():
    assert served_by_arrival(ARRIVED) == [False, True, True, False]


def test_fifo_score_is_the_share_of_orders_among_the_first_arrivals():
    assert fifo_score([True, True, False, False]) == 1.0  # the first two served
    assert fifo_score([False, True, True, False]) == 0.5  # one of the first two
    assert fifo_score([False, False, True, True]) == 0.0  # the last served, the first not
    assert fifo_score([True, False, True, False, True, False]) == pytest.approx(2 / 3)
    assert math.isnan(fifo_score([False, False])) and math.isnan(fifo_score([]))
    assert run_figures(ARRIVED).fifo_score == 0.5
    assert math.isnan(run_figures(RUN).fifo_score)  # no stamps at all


# Four orders with the app's timings (lock wait, hold), one without (an older app),
# and a refusal, whose timings are not the orders' and are left out.
TIMED = [
    (0.0, 0.1, "created", 0.0, 2.0),
    (0.0, 0.2, "created", 10.0, 4.0),
    (0.1, 0.3, "created", 20.0, 6.0),
    (0.2, 0.4, "created", 30.0, 100.0),
    (0.3, 0.5, "created"),
    (0.4, 0.5, "busy", 5000.0, None),
]


def test_run_figures_takes_wait_and_hold_percentiles_of_the_orders():
    f = run_figures(TIMED)
    assert (f.wait_p50_ms, f.wait_p99_ms) == (10.0, 30.0)
    assert (f.hold_p50_ms, f.hold_p99_ms) == (4.0, 100.0)
    assert math.isnan(run_figures(RUN).hold_p50_ms)  # no timings at all


def test_audits_of_a_spread_sale_add_up_and_one_bad_product_breaks_the_ledger():
    good = {"orders": 3, "oversold": 0, "lost_updates": 0, "consistent": True, "retries": 1}
    bad = {"orders": 5, "oversold": 2, "lost_updates": -2, "consistent": False, "retries": 0}
    both = audits_combined([good, good])
    assert {k: both[k] for k in ("orders", "oversold", "lost_updates", "consistent", "retries")} == {
        "orders": 6, "oversold": 0, "lost_updates": 0, "consistent": True, "retries": 2}
    assert math.isnan(both["confirm_p50_ms"])  # no gate: nothing confirmed later
    combined = audits_combined([good, bad])
    assert (combined["orders"], combined["oversold"], combined["lost_updates"]) == (8, 2, 2)
    assert combined["consistent"] is False


def test_a_gate_sale_reports_its_slowest_products_time_from_accepted_to_confirmed():
    def gate(p50, p99):
        return {"orders": 2, "oversold": 0, "lost_updates": 0, "consistent": True,
                "gate": {"confirm_p50_ms": p50, "confirm_p99_ms": p99}}

    combined = audits_combined([gate(5.0, 40.0), gate(9.0, 20.0), gate(None, None)])
    assert (combined["confirm_p50_ms"], combined["confirm_p99_ms"]) == (9.0, 40.0)
    f = run_figures(RUN, combined)
    assert (f.confirm_p50_ms, f.confirm_p99_ms) == (9.0, 40.0)


def test_a_hot_row_compares_its_orders_with_the_ceiling_and_its_spread_run():
    hot, spread = row("atomic", True), row("atomic (spread)", True)  # 3 orders/s each
    spread.median = dataclasses.replace(spread.median, orders_per_s=6.0)
    h = HotRow(label="atomic", hot=hot, spread=spread, ceiling=30.0)
    assert (h.hot_to_ceiling, h.spread_to_ceiling, h.hot_to_spread) == (0.1, 0.2, 0.5)


# A sale that opens at t=10 s: page loads from 8 s (one failed), a herd at 10.0-10.2,
# one purchase sent early and one after the first second.
OPENS_AT = 10.0
READS = [(8.0, 8.02, True), (8.5, 8.53, True), (9.0, 9.1, False), (9.5, 9.52, True), (10.5, 10.6, True)]
OPENING = [
    (9.9, 9.91, "early"),
    (10.0, 10.2, "created"),
    (10.05, 10.45, "created"),
    (10.1, 10.3, "busy"),
    (10.12, 10.5, "sold_out"),
    (10.2, 10.25, "error"),
    (11.5, 11.6, "sold_out"),
]


def test_opening_figures_count_the_reads_before_and_the_first_seconds_answers():
    f = opening_figures(OPENING, READS, OPENS_AT)
    assert f.reads_before == 4 and f.read_errors == 1
    assert f.reads_per_s == 4 / 2.0  # from the first load (8 s) to the opening
    assert f.read_p50_ms == pytest.approx(20) and f.read_p99_ms == pytest.approx(30)  # the answered
    first = (f.first_second, f.first_created, f.first_sold_out, f.first_busy, f.first_errors)
    assert first == (5, 2, 1, 1, 1)
    assert f.first_p50_ms == pytest.approx(200) and f.first_p99_ms == pytest.approx(400)
    assert f.early == 1
    assert f.sold_in_ms == pytest.approx(450)


def test_opening_figures_of_a_sale_that_sold_nothing():
    f = opening_figures([(10.0, 10.1, "sold_out")], [], OPENS_AT)
    assert math.isnan(f.sold_in_ms) and math.isnan(f.reads_per_s) and f.reads_before == 0


def test_requests_per_tick_buckets_by_when_each_was_sent():
    ticks = requests_per_tick(OPENING, READS, OPENS_AT, before_s=0.5, after_s=0.3)
    assert [t for t, _, _ in ticks] == [-0.5, -0.4, -0.3, -0.2, -0.1, 0.0, 0.1, 0.2]
    assert ticks[0] == (-0.5, 1, 0)  # the load at 9.5
    assert ticks[4] == (-0.1, 0, 1)  # the early purchase at 9.9
    assert ticks[5] == (0.0, 0, 2) and ticks[6] == (0.1, 0, 2) and ticks[7] == (0.2, 0, 1)


def test_median_figures_takes_medians_of_opening_rounds_too():
    one = opening_figures(OPENING, READS, OPENS_AT)
    other = dataclasses.replace(one, first_p99_ms=800.0, early=3)
    third = dataclasses.replace(one, first_p99_ms=600.0, early=5)
    median = median_figures([one, other, third])
    assert type(median) is type(one)
    assert median.first_p99_ms == 600.0 and median.early == 3


def test_opening_figures_hold_every_purchase_the_most_in_flight_and_who_came_first():
    # Four buyers by arrival: the first, third and fourth got an order; three orders,
    # two of them to the first three to arrive.
    arrivals = [(8.5, False), (8.0, True), (9.5, True), (9.0, False)]
    f = opening_figures(OPENING, READS, OPENS_AT, arrivals)
    assert f.fifo == pytest.approx(1 / 2)  # two orders; of the first two to come, one served
    # Four purchases sent from 10.0 to 10.12, none answered before 10.2, where the first
    # is answered as the fifth is sent.
    assert f.in_flight == 4
    assert f.purchase_p50_ms == pytest.approx(200)


def test_most_in_flight_counts_what_is_sent_and_not_yet_answered_at_one_moment():
    assert most_in_flight([(0, 1), (0.5, 1.5), (0.9, 3), (2.5, 3)], 1.0, 3.0) == 2  # the first ends at 1
    assert most_in_flight([(0, 5), (1, 2), (1.5, 2.5)], 0, 3) == 3
    assert most_in_flight([(0, 1), (1, 2)], 0, 3) == 1  # one answered as the other is sent
    assert most_in_flight([], 0, 1) == 0
