"""The gate script's benchmark runs both ways against a Redis of its own and reports
what it measured (the figures are its business)."""

import subprocess
import sys

import pytest

from stack.config import ROOT

pytestmark = pytest.mark.server  # the script starts a Redis of its own


def test_both_ways_run_and_batches_form_only_when_the_scripts_go_together():
    command = [sys.executable, "-m", "benchmarks.gate_script", "--seconds", "0.5", "--rounds", "1",
               "--processes", "1", "--threads", "8"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = {cells[1].strip(): [float(c.replace(",", "")) for c in cells[2:6]]
            for line in result.stdout.splitlines() if line.startswith("| ")
            for cells in [line.split("|")] if cells[2].strip()[:1].isdigit()}
    assert set(rows) == {"each alone", "sent together"}
    for rate, cpu, ceiling, _ in rows.values():
        assert rate > 0 and cpu > 0 and abs(ceiling - 1e6 / cpu) <= 0.01 * ceiling
    assert rows["each alone"][3] == 1.0  # a round trip a script
    assert rows["sent together"][3] > 1.0  # eight buyers at once: batches form
