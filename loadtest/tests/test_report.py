"""The report's rendering, on hand-made rows."""

import dataclasses
import json

from loadtest.figures import HotRow, OpeningRow, Row, as_dict, opening_figures, requests_per_tick, run_figures
from loadtest.report import (
    FIRST_COME_COLUMNS,
    HOT_COLUMNS,
    OPENING_COLUMNS,
    hot_table,
    html_table,
    markdown_table,
    opening_table,
    segments_table,
    write_index,
    write_report,
)

from .test_figures import AUDIT, OPENING, OPENS_AT, READS, RUN


def rows():
    ping = run_figures([(0.0, 0.01, "ping"), (0.0, 0.02, "ping")])
    broken = run_figures(RUN, {**AUDIT, "oversold": 7, "lost_updates": 7, "consistent": False})
    fine = run_figures(RUN, AUDIT)
    return [
        Row(label="ping (no-op ceiling)", strategy="ping", claims_correct=False, fast_path=True,
            median=ping, rounds=[ping], ratio_to_ceiling=1.0),
        Row(label="none", strategy="none", claims_correct=False, fast_path=True, median=broken,
            rounds=[broken], ratio_to_ceiling=0.25),
        Row(label="atomic", strategy="atomic", claims_correct=True, fast_path=True, median=fine,
            rounds=[fine], ratio_to_ceiling=0.5, rejections_ratio_to_ceiling=0.08),
    ]


def test_markdown_table_has_a_row_per_strategy_and_the_ceiling():
    lines = markdown_table(rows()).splitlines()
    assert lines[0].startswith("| strategy | attempts | orders | oversold |")
    assert len(lines) == 2 + 3
    # No gate (nothing confirmed later), no lock, no arrival stamps: dashes.
    assert lines[2] == ("| ping (no-op ceiling) | 2 | – | – | – | – | 100 | 1.00 | – | – | – "
                        "| 10/20/20 | –/–/– | –/– | –/– | – | 0 | 0 | 0 |")
    assert "| 8 (0.08) |" in lines[4]  # rejections/s after the sale, and its share of the ceiling
    assert "| none | 9 | 3 | 7 | 7 | BROKEN |" in lines[3]
    assert "| atomic | 9 | 3 | 0 | 0 | ok |" in lines[4]
    assert "| 0.50 |" in lines[4]


def test_the_first_come_table_keeps_the_sales_own_cells_for_who_got_the_stock():
    full = markdown_table(rows()).splitlines()
    short = markdown_table(rows(), FIRST_COME_COLUMNS).splitlines()
    assert short[0] == "| strategy | orders | lock wait p50/p99 ms | FIFO score | busy | retries |"
    names = full[0].strip("| ").split(" | ")
    for line_full, line_short in zip(full[2:], short[2:], strict=True):
        cells = dict(zip(names, line_full.strip("| ").split(" | "), strict=True))
        assert line_short.strip("| ").split(" | ") == [cells[n] for n, _ in FIRST_COME_COLUMNS]


def test_html_marks_oversell_in_red():
    table = html_table(rows())
    assert table.count('class="bad"') == 3  # oversold, lost updates, ledger of "none"


def test_write_report_renders_offline_charts_and_an_index(tmp_path):
    run = tmp_path / "20260101-000000"
    run.mkdir()
    md, page = write_report(run, rows(), stamp="20260101-000000", command="python -m loadtest.compare",
                            setup="test setup", rounds=1, broken=[])
    text = page.read_text()
    assert text.count("<svg") == 4  # throughput, sell-out, oversold, latency (no arrivals: no FIFO)
    assert "http://" not in text.split("<svg", 1)[0] and "<script" not in text  # nothing fetched
    oversold_svg = (run / "oversold.svg").read_text()
    assert "#c62828" in oversold_svg  # the red bar of "none"
    assert "| atomic |" in md.read_text()
    (run / "summary.json").write_text(json.dumps({"command": "c", "broken": [],
                                                  "rows": [as_dict(r) for r in rows()]}))
    index = write_index(tmp_path).read_text()
    assert 'href="20260101-000000/report.html"' in index and "gate passed" in index


def test_a_failed_gate_is_in_the_report(tmp_path):
    md, page = write_report(tmp_path, rows(), stamp="s", command="c", setup="s", rounds=1,
                            broken=["setnx: oversold 1, lost updates 1, consistent False"])
    assert "Gate failed" in md.read_text() and "Gate failed" in page.read_text()


def test_hot_table_puts_each_strategy_beside_its_spread_run():
    ceiling, _, atomic = rows()
    timed = run_figures([(0.0, 0.5, "created", 0.0, 2.0), (0.0, 1.0, "created", 1.0, 4.0)],
                        {**AUDIT, "orders": 2})
    spread = Row(label="atomic (spread)", strategy="atomic", claims_correct=True, fast_path=True,
                 median=timed, rounds=[timed])
    broken = Row(label="none", strategy="none", claims_correct=False, fast_path=True,
                 median=timed, rounds=[run_figures(RUN, {**AUDIT, "lost_updates": 4, "consistent": False})])
    hot_rows = [HotRow(label="atomic", hot=atomic, spread=spread, ceiling=20.0),
                HotRow(label="none", hot=broken, spread=spread, ceiling=20.0)]
    lines = hot_table(hot_rows, ceiling).splitlines()
    assert lines[0] == "Ceiling: /api/ping answered 100 req/s."
    assert lines[2].startswith("| strategy | hot orders/s | × ping | spread orders/s | spread × ping "
                               "| hot ÷ spread | ok p50/p95/p99 ms | hold p50/p99 ms |")
    # atomic: 3 orders/s hot (0.15 of 20), 4 spread (0.20), 0.75 of its spread run.
    assert lines[4].startswith("| atomic | 3 | 0.15 | 4 | 0.20 | 0.75 | 900/1,200/1,200 | –/– | 2.0/4.0 |")
    assert lines[4].endswith("| 0 | 0 | ok |")
    assert lines[5].endswith("| 0 | 4 | BROKEN |")
    assert html_table(hot_rows, HOT_COLUMNS).count('class="bad"') == 2  # none's lost updates, ledger


def test_the_segments_sweep_is_a_table_of_orders_per_strategy_and_count():
    _, _, atomic = rows()  # 3 orders/s

    def hot(strategy, segments, spread_orders_per_s):
        spread = Row(label=f"{strategy} (spread)", strategy=strategy, claims_correct=True, fast_path=True,
                     median=dataclasses.replace(atomic.median, orders_per_s=spread_orders_per_s),
                     rounds=atomic.rounds)
        return HotRow(label=f"{strategy} ×{segments}", spread=spread, ceiling=20.0, segments=segments,
                      hot=dataclasses.replace(atomic, label=f"{strategy} ×{segments}", strategy=strategy))

    sweep = [hot("atomic", 1, 4.0), hot("atomic", 4, 4.0), hot("redisson", 4, 6.0)]
    lines = segments_table(sweep).splitlines()
    assert lines[0] == "| strategy | spread orders/s | ×1 segments | ×4 segments |"
    assert lines[2] == "| atomic | 4 | 3 (0.75) | 3 (0.75) |"
    assert lines[3] == "| redisson | 6 | – | 3 (0.50) |"
    assert segments_table(sweep[:1]) == ""  # one count: no sweep
    assert "Orders/s by the hot product's segments" in hot_table(sweep, rows()[0])


def test_the_fifo_chart_ticks_each_order_at_its_arrival_rank(tmp_path):
    table = rows()
    table[2].served_by_arrival = [True, True, False, True, False]
    table[2].median = dataclasses.replace(table[2].median, fifo_score=2 / 3)
    md, page = write_report(tmp_path, table, stamp="s", command="c", setup="s", rounds=1, broken=[])
    assert page.read_text().count("<svg") == 5
    svg = (tmp_path / "fifo.svg").read_text()
    assert "atomic (0.67)" in svg and "the first 3 arrivals" in svg
    assert "| 0.67 |" in md.read_text()


def opening_rows():
    opening = opening_figures(OPENING, READS, OPENS_AT)
    ticks = requests_per_tick(OPENING, READS, OPENS_AT, before_s=0.2, after_s=0.2)
    fine = run_figures(OPENING, {**AUDIT, "orders": 2})
    broken = run_figures(OPENING, {**AUDIT, "orders": 3, "oversold": 1, "consistent": False})
    return [OpeningRow(label="atomic", sale=Row(label="atomic", strategy="atomic", claims_correct=True,
                                                fast_path=True, median=fine, rounds=[fine]),
                       opening=opening, rounds=[opening], ticks=ticks),
            OpeningRow(label="none", sale=Row(label="none", strategy="none", claims_correct=False,
                                              fast_path=True, median=broken, rounds=[broken]),
                       opening=opening, rounds=[opening], ticks=ticks)]


def test_the_opening_table_shows_the_first_second_and_the_requests_around_it():
    text = opening_table(opening_rows())
    lines = text.splitlines()
    assert lines[0].startswith("| strategy | page loads/s before | page p50/p99 ms | page errors | "
                               "1st s: purchases | 1st s: orders | 1st s: sold out | 1st s: busy | "
                               "1st s: errors | 1st s p50/p99 ms |")
    # A closed crowd: no schedule for the client to fall behind ("open: client behind").
    assert lines[2] == ("| atomic | 2 | 20/30 | 1 | 5 | 2 | 1 | 1 | 1 | 200/400 | 450 | 200/400 | 4 | – | – "
                        "| 1 | 2 | 0 | 0 | ok | 1 |")
    assert lines[3].endswith("| 3 | 1 | 0 | BROKEN | 1 |")
    assert "| ms from the opening | -200 | -100 | +0 | +100 |" in text
    assert "| atomic: page / buy | 0 / 0 | 0 / 1 | 0 / 2 | 0 / 2 |" in text
    assert html_table(opening_rows(), OPENING_COLUMNS).count('class="bad"') == 2  # none's oversold, ledger


def test_an_opening_report_has_its_charts_and_counts_in_the_index(tmp_path):
    run = tmp_path / "20260101-000000"
    run.mkdir()
    md, report = write_report(run, [], stamp="20260101-000000", command="python -m loadtest.compare "
                              "--mode opening", setup="opening", rounds=1, broken=[],
                              opening_rows=opening_rows())
    page = report.read_text()
    assert "Opening mode" in page and page.count("<svg") == 2
    assert (run / "opening_ticks.svg").exists() and (run / "opening_latency.svg").exists()
    assert "1st s: orders" in md.read_text()
    (run / "summary.json").write_text(json.dumps({"command": "c", "broken": [], "opening_rows": [{}, {}]}))
    assert "2 rows" in write_index(tmp_path).read_text()
