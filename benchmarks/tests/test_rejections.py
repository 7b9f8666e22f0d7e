"""The refusal benchmark runs against the real stack, and its "mark lost" row really
runs without the sale's state (the figures are the benchmark's business)."""

import subprocess
import sys

from stack.config import ROOT


def test_each_row_is_answered_as_it_claims_with_the_sale_state_deleted_for_mark_lost(stack_config):
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.rejections", "--seconds", "0.5", "--rounds", "1",
         "--processes", "1", "--threads", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "unexpected answers: 0" in result.stdout
    rows = [line.split("|")[1].strip() for line in result.stdout.splitlines() if line.startswith("| ")]
    assert rows == ["row", "ping", "marked", "mark lost", "replays"]
