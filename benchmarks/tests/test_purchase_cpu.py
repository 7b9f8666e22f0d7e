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


def test_the_memory_comparison_measures_each_row_with_the_memory_off_and_on(stack_config):
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.purchase_cpu", "--requests", "20", "--memory-rounds", "1",
         "--row", "gate, sold out", "--row", "gate"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = [line.split("|")[1:4] for line in result.stdout.splitlines()
            if line.startswith("| gate")]
    assert [row[0].strip() for row in rows] == ["gate, sold out", "gate"]  # ping is the unit, not a row
    assert all(float(cell) > 0 for row in rows for cell in row[1:]), rows
