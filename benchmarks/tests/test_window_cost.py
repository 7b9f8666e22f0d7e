"""The payment window's benchmark runs against the real stack and reports each row
it names, and an expirer that returned every unit it was timed on."""

import subprocess
import sys

from stack.config import ROOT


def test_the_window_cost_reports_its_rows_and_the_expirers_returns(stack_config):
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.window_cost", "--rounds", "1", "--requests", "20",
         "--orders", "30"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = {cells[1].strip(): [c.strip() for c in cells] for line in result.stdout.splitlines()
            if line.startswith("| ") and (cells := line.split("|"))[1].strip() not in ("row", "strategy")}
    assert {"gate", "atomic, spread", "setnx, spread", "atomic", "setnx", "mysql"} <= set(rows)
    for strategy in ("atomic", "setnx", "mysql", "gate"):
        assert rows[strategy][3] == "30"  # every unit of the 30 due orders went back


def test_each_pair_runs_in_the_other_order_every_other_run():
    from benchmarks.cpu import alternated
    from benchmarks.window_cost import ROWS

    first, second = alternated(0, ROWS), alternated(1, ROWS)
    assert first[0] == second[0] == "ping"
    for without, with_window in ROWS:
        assert first.index(without) < first.index(with_window)
        assert second.index(with_window) < second.index(without)
