"""The idle stack's reading: a row a program, the costliest first, their sum last;
against the stack, every program the supervisor runs is read."""

import subprocess
import sys

from benchmarks.idle import Reading, table
from stack.config import ROOT
from stack.supervisor import Supervisor


def test_the_table_puts_the_costliest_first_and_sums_the_programs_read_both_times():
    before = {"persist1": Reading(1.0, 100), "redis": Reading(2.0, 50), "gone": Reading(0.5, 5)}
    after = {"persist1": Reading(1.3, 400), "redis": Reading(2.1, 150), "new": Reading(9.0, 9)}
    assert table(before, after, 10.0) == [
        "| program | % of a core | wakes a second |", "|---|---:|---:|",
        "| persist1 | 3.00 | 30.0 |",
        "| redis | 1.00 | 10.0 |",
        "| **the stack** | **4.00** | **40.0** |",
    ]


def test_on_the_stack_every_program_is_a_row_and_the_sum_is_theirs(stack_config):
    result = subprocess.run([sys.executable, "-m", "benchmarks.idle", "--seconds", "1"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("| ")][1:]  # no header
    rows = {cells[0]: (float(cells[1]), float(cells[2].replace(",", "")))
            for cells in ([cell.strip(" *") for cell in line.strip("|").split("|")] for line in lines)}
    running = {info["name"] for info in Supervisor(stack_config).processes() if info["pid"]}
    read = set(rows) - {"the stack"}
    assert {"supervisord", "app1", "mariadb", "redis-gate"} <= read <= running | {"supervisord"}
    programs = [value for name, value in rows.items() if name != "the stack"]
    assert all(cpu >= 0 and wakes >= 0 for cpu, wakes in programs)
    total = rows["the stack"]
    assert abs(total[0] - sum(cpu for cpu, _ in programs)) <= 0.01 * len(programs)
    assert abs(total[1] - sum(wakes for _, wakes in programs)) <= 0.1 * len(programs)
    assert total[1] > 0  # something of an idle stack wakes in a second: its loops do
