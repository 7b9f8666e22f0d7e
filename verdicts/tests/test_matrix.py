"""Which cells the default matrix runs."""

from common.strategies import STRATEGIES
from verdicts.links import LINK_FAULTS
from verdicts.matrix import CALM, NEMESES, ONLY_FOR, default_plan


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
