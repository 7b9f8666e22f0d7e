"""The capacity benchmark measures every bound on the real stack and reports each
(the figures are its business), and its arithmetic is the table's."""

import contextlib
import signal
import subprocess
import sys

import psutil
import pytest

from benchmarks.capacity import (
    HOT,
    PRODUCTS,
    SCALED,
    SPREAD,
    Drain,
    Hot,
    adding_nodes,
    busy,
    median,
    orders_per_s,
)
from benchmarks.gate import Run
from stack.config import ROOT
from stack.servers import StackError
from stack.supervisor import Supervisor


def test_a_runs_orders_are_its_201s_and_its_busy_share_is_its_cpu_over_the_cores():
    run = Run("gate", 1000.0, 1.0, 2.0, {201: 600, 503: 400}, {"apps": 800.0, "mariadb": 200.0})
    assert orders_per_s(run, 2.0) == 300.0
    assert busy(run, cores=2) == 0.5  # 1,000 µs an answer at 1,000 answers/s: one core of two
    assert Drain(products=1, persisters=1, orders=500, seconds=0.25, cpu_us={}).rate == 2000.0


def _run(orders: int, apps_us: float, hold_ms: float | None = None) -> Run:
    return Run("r", orders / 2.0, 1.0, 2.0, {201: orders}, {"apps": apps_us, "mariadb": 10.0}, hold_ms)


def test_a_rows_median_is_the_round_of_median_key_with_each_roles_median_cpu():
    middle = median([_run(300, 50.0), _run(100, 70.0), _run(200, 90.0)], key=lambda r: orders_per_s(r, 2.0))
    assert middle.statuses == {201: 200} and middle.cpu_us == {"apps": 70.0, "mariadb": 10.0}
    drains = [Drain(1, 1, 1000, seconds, {"mariadb": us})
              for seconds, us in ((1.0, 30.0), (0.5, 10.0), (2.0, 20.0))]
    assert median(drains, key=lambda d: d.rate) == Drain(1, 1, 1000, 1.0, {"mariadb": 20.0})


def test_adding_nodes_measures_instances_and_persisters_and_shows_the_estimates_sums():
    scaled = {(kind, strategy, n): _run(orders, 1.0) for kind in ("hot", "spread") for strategy in SCALED
              for n, orders in ((1, 100), (2, 150))}
    drained = [Drain(products, persisters, 1000, seconds, {}) for products, persisters, seconds in
               ((1, 1, 1.0), (1, 2, 0.8), (PRODUCTS, 1, 1.0), (PRODUCTS, 2, 0.5))]
    atomic = Hot(_run(100, 1.0, hold_ms=2.0), _run(100, 1.0, hold_ms=0.5))
    rows = adding_nodes(2, 2.0, scaled, drained, 10_000.0, atomic)
    measured = [row for row in rows if row[-1].startswith("measured")]
    assert [row[2:5] for row in measured[:4]] == [["50", "75", "1.50"]] * 4  # orders over 2 s
    assert [row[4] for row in measured[4:]] == ["1.25", "2.00"]  # 1,000 orders in 1 s, 0.8 s, 0.5 s
    estimates = {row[0] + ", " + row[1]: row for row in rows if row[-1].startswith("estimate")}
    assert estimates[f"Redis shards, 1 → 2, gate, {PRODUCTS} products"][3] == "20,000"
    assert "2 × 10,000" in estimates[f"Redis shards, 1 → 2, gate, {PRODUCTS} products"][5]
    segments = estimates["stock segments, 1 → 2, atomic, one hot product"]
    assert segments[2:4] == ["2,000", "4,000"]  # one order a hold: 1,000 ms / 0.5 ms


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


# Past the suite's 300 s: the run's own timeout below bounds a hang, not the machine's speed.
@pytest.mark.timeout(960)
def test_every_bound_is_measured_and_the_persisters_run_again_after(stack_config):
    command = [sys.executable, "-m", "benchmarks.capacity", "--seconds", "1", "--connections", "8",
               "--rounds", "1", "--warm-up", "0"]
    try:
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    finally:  # a run cut short leaves the persisters it paused paused: the next tests' stack
        for name in stack_config.persister_names:
            with contextlib.suppress(StackError):  # not running: the assertions below say so
                Supervisor(stack_config).signal_group(name, signal.SIGCONT)
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
    added = _rows(lines, "| added | design, sale |")
    instances = f"app instances, 1 → {stack_config.instances}"
    assert [cells[0] for cells in added[:len(SCALED) * 2]] == [instances] * 4
    assert all(float(cells[2].replace(",", "")) > 0 and cells[5] == "measured" for cells in added[:4])
    # The plan from this run's costs: each rate, both designs, every part sized.
    plan = _rows(lines, "| purchases a second | design |")
    assert [cells[:2] for cells in plan] == [[rate, design] for rate in ("10,000", "50,000", "200,000")
                                             for design in ("atomic", "gate")]
    assert all(int(cells[2]) > 0 and int(cells[5]) > 0 for cells in plan)
    for name in stack_config.persister_names:  # resumed: none left stopped (SIGSTOP)
        info = Supervisor(stack_config).info(name)
        assert info["statename"] == "RUNNING"
        assert psutil.Process(info["pid"]).status() != psutil.STATUS_STOPPED
