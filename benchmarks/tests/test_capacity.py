"""The capacity benchmark measures every bound on the real stack and reports each
(the figures are its business), and its arithmetic is the table's."""

import subprocess
import sys

import psutil

from benchmarks.capacity import HOT, SPREAD, Drain, busy, orders_per_s
from benchmarks.gate import Run
from stack.config import ROOT
from stack.supervisor import Supervisor


def test_a_runs_orders_are_its_201s_and_its_busy_share_is_its_cpu_over_the_cores():
    run = Run("gate", 1000.0, 1.0, 2.0, {201: 600, 503: 400}, {"apps": 800.0, "mariadb": 200.0})
    assert orders_per_s(run, 2.0) == 300.0
    assert busy(run, cores=2) == 0.5  # 1,000 µs an answer at 1,000 answers/s: one core of two
    assert Drain(products=1, persisters=1, orders=500, seconds=0.25, cpu_us={}).rate == 2000.0


def _rows(lines: list[str], header: str) -> list[list[str]]:
    """The cells of each row of the table under ``header``."""
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("| "):
            break
        rows.append([cell.strip().strip("*") for cell in line.split("|")[1:-1]])
    return rows


def _table(lines: list[str], header: str) -> dict[str, list[str]]:
    return {cells[0]: cells[1:] for cells in _rows(lines, header)}


def test_every_bound_is_measured_and_the_persisters_run_again_after(stack_config):
    command = [sys.executable, "-m", "benchmarks.capacity", "--seconds", "1", "--connections", "8",
               "--rounds", "1"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stdout.splitlines()
    hot = _table(lines, "| design | orders/s here | what every buyer takes in turn")
    assert list(hot) == list(HOT)
    for design, cells in hot.items():
        orders, hold, ceiling = (float(cells[0].replace(",", "")), cells[2].split()[0], cells[3])
        assert orders > 0 and float(hold) > 0 and float(ceiling.replace(",", "")) > 0, design
    spread = _table(lines, "| design | orders/s here | apps |")
    assert list(spread) == list(SPREAD)
    for cells in spread.values():
        assert all(float(c.replace(",", "")) > 0 for c in cells[:2] + cells[5:])
    drains = _rows(lines, "| products | persisters writing |")
    everyone = str(stack_config.persisters)
    assert [cells[:2] for cells in drains] == [["1", "1"], ["1", everyone], ["50", "1"], ["50", everyone]]
    assert all(float(cells[4].replace(",", "")) > 0 for cells in drains)
    assert "one Redis shard sells one hot product at up to" in result.stdout
    for name in stack_config.persister_names:  # resumed: none left stopped (SIGSTOP)
        info = Supervisor(stack_config).info(name)
        assert info["statename"] == "RUNNING"
        assert psutil.Process(info["pid"]).status() != psutil.STATUS_STOPPED
