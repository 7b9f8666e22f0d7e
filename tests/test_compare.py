"""One short comparison on the real stack: the pipeline from Locust to report works.
(Figures are the report's business, not this test's.)"""

import json
import subprocess
import sys
import time

import pytest

from common.history import Final, Purchase, Reset, read
from stack.config import ROOT
from tests.test_metrics import scraped_from
from tests.test_prometheus import eventually
from verdicts.checker import check

pytestmark = pytest.mark.e2e


def test_compare_two_strategies_writes_the_report_and_passes_the_gate(stack_apps, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "loadtest.compare", "--strategies", "none,atomic", "--rounds", "1",
         "--users", "20", "--attempts", "150", "--stock", "50", "--reports", str(tmp_path), "--history"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    stack_apps()  # compare put the instances back as they were started; so does the fixture
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [run] = [p for p in tmp_path.iterdir() if p.is_dir()]
    for name in ("report.md", "report.html", "summary.json", "throughput.svg",
                 "ping-r1_stats.csv", "atomic-r1_stats.csv", "none-r1_stats.csv"):
        assert (run / name).exists(), name
    summary = json.loads((run / "summary.json").read_text())
    rows = {row["label"]: row for row in summary["rows"]}
    assert list(rows) == ["ping (no-op ceiling)", "none", "atomic"]
    atomic = rows["atomic"]["median"]
    assert (atomic["orders"], atomic["oversold"], atomic["lost_updates"], atomic["consistent"]) == \
        (50, 0, 0, True)
    assert atomic["attempts"] == 150 and atomic["errors"] == 0
    assert 0 < rows["atomic"]["ratio_to_ceiling"]
    assert summary["broken"] == []
    assert "| atomic | 150 | 50 | 0 | 0 | ok |" in result.stdout
    # Every purchase's arrival came back from the app: a rank per purchase (replays
    # left out), an order at 50 of them, and a FIFO score for the table and the chart.
    served = rows["atomic"]["served_by_arrival"]
    assert served.count("1") == 50 and 100 <= len(served) <= 150
    assert 0 <= atomic["fifo_score"] <= 1
    assert (run / "fifo.svg").exists()
    assert (tmp_path / "index.html").exists()
    # Each round's history: every attempt, between the reset and the final read, and
    # the checker's verdict on it agrees with the audit.
    events = read(run / "atomic-r1.history.jsonl")
    assert isinstance(events[0], Reset) and isinstance(events[-1], Final)
    purchases = [e for e in events if isinstance(e, Purchase)]
    assert len(purchases) == 150 and len(events[-1].orders) == 50 and events[-1].remaining == 0
    assert check(events).valid is True
    none = rows["none"]["median"]
    if none["oversold"] or none["lost_updates"]:
        assert check(read(run / "none-r1.history.jsonl")).valid is False


def edge_counts(config) -> dict[str, float]:
    """HTTP code → purchases nginx answered with it, as mtail counts them from its
    access log (the apps' own counters restart with them; the edge's do not)."""
    scraped = scraped_from(f"http://127.0.0.1:{config.exporter_ports['edge']}/metrics")
    return {dict(labels)["code"]: value for (name, labels), value in scraped.items()
            if name == "flashsale_edge_purchases_total"}


def edge_counts_settled(config, *, quiet_s: float = 1.0, seconds: float = 30) -> dict[str, float]:
    """``edge_counts`` once mtail has read what nginx logged so far: it tails the log,
    and on a busy machine it falls behind; a baseline read then counts the last test's
    answers in the next test's. Caught up: the lines it has read
    (``mtail_log_lines_total``) unchanged for ``quiet_s``, nothing selling meanwhile."""
    url = f"http://127.0.0.1:{config.exporter_ports['edge']}/metrics"

    def lines_read() -> float:
        return sum(value for (name, _), value in scraped_from(url).items() if name == "mtail_log_lines_total")

    deadline = time.monotonic() + seconds
    last, since = lines_read(), time.monotonic()
    while time.monotonic() - since < quiet_s and time.monotonic() < deadline:
        time.sleep(0.1)
        if (now := lines_read()) != last:
            last, since = now, time.monotonic()
    return edge_counts(config)


@pytest.mark.usefixtures("stack_watchers")  # the edge's counts: mtail
def test_two_locust_workers_share_the_load_and_their_merged_counts_are_the_servers(
        stack_apps, stack_config, tmp_path):
    """Locust's distributed mode: a master and two worker processes share the users
    and the requests; the report's figures, merged from both workers' samples, are the
    answers nginx counted, code by code, and the orders the database holds."""
    stack_apps()
    before = edge_counts_settled(stack_config)
    result = subprocess.run(
        [sys.executable, "-m", "loadtest.compare", "--strategies", "atomic", "--rounds", "1", "--users", "20",
         "--attempts", "151", "--stock", "50", "--workers", "2", "--reports", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    stack_apps()
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    # Each worker sent its own share (151 requests: 76 and 75), and said so.
    for share in ("worker 1/2: its share answered, 76 of 76", "worker 2/2: its share answered, 75 of 75"):
        assert share in result.stdout, result.stdout[-2000:]
    [run] = [p for p in tmp_path.iterdir() if p.is_dir()]
    atomic = {row["label"]: row for row in json.loads((run / "summary.json").read_text())["rows"]}["atomic"]
    median = atomic["median"]
    assert (median["attempts"], median["orders"], median["created"], median["errors"]) == (151, 50, 50, 0)
    merged = {"201": median["created"], "200": median["replayed"], "409": median["sold_out"]}
    expected = {code: count for code, count in merged.items() if count}

    def grown() -> dict[str, float]:
        after = edge_counts(stack_config)
        return {code: n - before.get(code, 0) for code, n in after.items() if n != before.get(code, 0)}

    assert eventually(lambda: grown() == expected, seconds=30), (grown(), expected)


def test_hot_mode_buys_with_every_request_and_reports_the_apps_hold_times(stack_apps, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "loadtest.compare", "--mode", "hot", "--strategies", "redisson",
         "--rounds", "1", "--users", "8", "--seconds", "2", "--segments", "1,4", "--reports", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    stack_apps()
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [run] = [p for p in tmp_path.iterdir() if p.is_dir()]
    for name in ("report.md", "report.html", "hot_throughput.svg", "hot_hold.svg", "segments.svg",
                 "redisson-r1_stats.csv", "redisson_spread-r1_stats.csv", "redisson_x4-r1_stats.csv"):
        assert (run / name).exists(), name
    summary = json.loads((run / "summary.json").read_text())
    assert summary["mode"] == "hot" and summary["broken"] == []
    row, segmented = summary["hot_rows"]
    assert (row["segments"], segmented["segments"]) == (1, 4)
    for side in ("hot", "spread"):
        median = row[side]["median"]
        # Every request bought, and every order is in the audit of its product(s).
        assert median["created"] == median["attempts"] == median["orders"] > 0
        assert (median["oversold"], median["lost_updates"], median["consistent"]) == (0, 0, True)
        assert 0 < median["hold_p50_ms"] <= median["hold_p99_ms"]  # the app's Server-Timing
        assert median["seconds"] >= 1.9  # the window (give or take the last answer in flight)
    spread_answers = json.loads((run / "redisson_spread-r1.json").read_text())
    assert spread_answers["skus"] == 8
    hot_4 = segmented["hot"]["median"]
    assert hot_4["created"] == hot_4["orders"] > 0 and hot_4["consistent"]
    assert "| redisson |" in result.stdout and "| redisson ×4 |" in result.stdout
    assert "| redisson | " in result.stdout.split("Orders/s by the hot product's segments")[1]


@pytest.mark.timeout(480)
def test_payment_mode_resells_unpaid_units_until_the_stock_is_paid(stack_apps, tmp_path):
    # The run stops itself once every unit is paid; its --payment-seconds only bound a
    # hang. A payer whose payment lands after its order expired buys again, so on a
    # busy machine the run takes a few such turns longer: the bound is not the test.
    result = subprocess.run(
        [sys.executable, "-m", "loadtest.compare", "--mode", "payment", "--strategies", "atomic",
         "--rounds", "1", "--users", "24", "--stock", "10", "--pay-ratio", "0.5", "--window", "1",
         "--grace", "1", "--payment-seconds", "180", "--reports", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=420,
    )
    stack_apps()  # compare put the instances back as they were started; so does the fixture
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [run] = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = json.loads((run / "summary.json").read_text())
    [row] = summary["payment_rows"]
    assert (row["label"], row["paid"], row["paid_is_stock"], row["oversold"], row["consistent"]) == \
        ("atomic", 10, True, 0, True)
    # Half the buyers never pay: their units came back and sold again, each once.
    assert row["expired"] >= 1 and row["returned"] == row["expired"] and row["resold"] == row["returned"]
    assert row["orders"] == row["paid"] + row["expired"] and row["pending"] == 0
    # Read once the provider had delivered every webhook: none of its payments unhandled.
    assert row["payments_unsettled"] == 0 and "webhooks all delivered" in result.stdout
    assert "| atomic |" in result.stdout and summary["broken"] == []
