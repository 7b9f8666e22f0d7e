"""The runner's arithmetic, on small hand-made runs whose figures are known."""

import math
from pathlib import Path

import pytest

from loadtest.figures import Row, gate, median_figures, parse_locust_stats, percentile, run_figures

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
