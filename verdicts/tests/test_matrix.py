"""Which cells the default matrix runs."""

from types import SimpleNamespace

import pytest

from common.strategies import STRATEGIES
from stack.config import StackConfig
from verdicts.links import LINK_FAULTS
from verdicts.matrix import CALM, NEMESES, ONLY_FOR, default_plan, run_cell


def test_every_strategy_runs_calm_and_only_the_correct_ones_meet_faults():
    plan = default_plan(list(STRATEGIES))
    assert {s for s, n in plan if n == CALM} == set(STRATEGIES)
    assert {s for s, n in plan if n != CALM} == {s for s, spec in STRATEGIES.items() if spec.claims_correct}
    assert set(NEMESES) == {n for _, n in plan}


def test_a_fault_meets_only_the_strategies_that_use_what_it_strikes():
    plan = default_plan(list(STRATEGIES))
    assert {s for s, n in plan if n == "kill-persister"} == {"gate"}
    assert {s for s, n in plan if n == "zk-leader"} == {"zookeeper"}
    assert {s for s, n in plan if n == "partition-holder-db"} == {"setnx"}
    assert {s for s, n in plan if n == "partition-holder-db-unfenced"} == {"setnx"}
    assert {s for s, n in plan if n == "partition-holder-zk"} == {"zookeeper"}
    assert {s for s, n in plan if n.startswith("failover-redis-holder")} == {"setnx"}
    assert {s for s, n in plan if n.startswith("clock-jump-redis")} == {"setnx"}
    assert {s for s, n in plan if n == "partition-persister-db"} == {"gate"}
    redis_users = {"gate", "setnx", "redisson", "redisson-fair"}
    assert {s for s, n in plan if n == "restart-redis-pending"} == redis_users
    assert {s for s, n in plan if n.endswith("-pending") and n.startswith("failover-gate")} == {"gate"}
    correct = {s for s, spec in STRATEGIES.items() if spec.claims_correct}
    for fault in set(LINK_FAULTS) - set(ONLY_FOR):
        assert {s for s, n in plan if n == fault} == correct


def test_when_the_nemesis_struck_is_told_only_of_cells_with_a_fault():
    from types import SimpleNamespace

    from verdicts.matrix import WINDOW, struck

    def cell(nemesis: str, at: float | None) -> SimpleNamespace:
        return SimpleNamespace(nemesis=nemesis, end_state=SimpleNamespace(struck_at=at, seconds=20.0))

    assert struck(cell(CALM, None)) == struck(cell(WINDOW, None)) == "—"  # nothing to strike
    assert struck(cell("kill-expirer", None)) == "**never**"
    assert struck(cell("kill-expirer", 7.5)) == "7.5 of 20.0"
    assert struck(cell("kill-app", 21.0)) == "21.0 of 20.0 (**after the sale**)"


def test_a_zookeeper_cell_refuses_test_hosts_started_without_zookeeper(tmp_path):
    """Test hosts start ZooKeeper only when asked (``HostedApps(zookeeper=True)``): a
    cell whose lock lives there says so before it sells, not as a sale that never
    gets its lock."""
    without = SimpleNamespace(zookeeper=False)
    with pytest.raises(ValueError, match="zookeeper=True"):
        run_cell(StackConfig.from_env(), strategy="zookeeper", nemesis="partition-holder-zk", out=tmp_path,
                 stock=1, buyers=1, threads=1, trigger=1, on=without)


def test_a_gate_cell_refuses_test_hosts_started_without_its_persister(tmp_path):
    """Test hosts start the gate's persister only when asked (``HostedApps(gate=True)``):
    a gate cell on hosts without one says so before it sells, not as orders never
    written."""
    without = SimpleNamespace(zookeeper=False, gate=False)
    with pytest.raises(ValueError, match="gate=True"):
        run_cell(StackConfig.from_env(), strategy="gate", nemesis="partition-app-db", out=tmp_path,
                 stock=1, buyers=1, threads=1, trigger=1, on=without)
