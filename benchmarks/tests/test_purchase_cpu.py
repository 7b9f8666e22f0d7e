"""The in-process CPU benchmark runs against the real stack and answers what each
row claims to measure (the figures themselves are the benchmark's business)."""

import subprocess
import sys

from stack.config import ROOT


def test_every_row_is_measured_on_the_answers_it_names(stack_config):
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.purchase_cpu", "--requests", "20", "--profile", "gate"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = {cells[1].strip(): cells for line in result.stdout.splitlines()
            if line.startswith("| ") and (cells := line.split("|"))[1].strip() not in ("row", "---")}
    answers = {label: cells[5].strip() for label, cells in rows.items()}
    assert answers == {"ping": "200: 20", "product": "200: 20", "gate, sold out": "409: 20",
                       "gate": "201: 20", "gate, signed in": "201: 20", "gate, payment window": "201: 20",
                       "gate, waiting room": "201: 20",
                       "atomic, spread": "201: 20",
                       "atomic, spread, signed in": "201: 20", "atomic, spread, payment window": "201: 20",
                       "setnx, spread": "201: 20", "setnx, spread, payment window": "201: 20",
                       "redisson, hot, 8 segments": "201: 20"}
    assert rows["ping"][3].strip() == "1.00"  # the others are multiples of it
    assert "cProfile, gate, 20 requests" in result.stdout
