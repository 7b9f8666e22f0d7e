"""The beside and alone parts' shares of the tests that drive no lane's stack (stack.pool)."""

import json
import random
from types import SimpleNamespace

import pytest

from stack import pool as shares_module
from stack import suite
from stack.config import StackConfig
from stack.pool import shares
from stack.suite import SHARE


def test_the_pinned_tests_fill_the_last_share_and_the_others_even_the_shares_out():
    rng = random.Random(7)
    tests = [f"t{i}" for i in range(200)]
    durations = {test: rng.uniform(0.1, 40) for test in tests}
    pinned = set(tests[:15])  # the alone part's own, less than a share's time
    cut = shares(tests, durations, 3, pinned)
    assert sorted(test for share in cut for test in share) == sorted(tests)  # each once
    assert pinned <= set(cut[-1])
    assert all(share == sorted(share, key=tests.index) for share in cut)  # in the order given
    took = [sum(durations[test] for test in share) for share in cut]
    # Longest first into the least: no share ends later than the least by more than one test.
    assert max(took) - min(took) <= max(durations.values()), took


def test_pinned_tests_longer_than_a_share_leave_the_last_share_only_them():
    durations = {"alone": 100.0, "a": 10.0, "b": 10.0, "c": 10.0}
    assert shares(list(durations), durations, 3, {"alone"}) == [["a", "c"], ["b"], ["alone"]]


def test_a_test_without_a_duration_counts_as_their_mean():
    durations = {"a": 30.0, "b": 10.0}
    # "new" counts 20 s: after "a" (30) in the first share, "new" (20) and "b" (10) share the second.
    assert shares(["a", "b", "new"], durations, 2) == [["a"], ["b", "new"]]
    assert shares(["x", "y"], {}, 2) == [["x"], ["y"]]  # none known: each counts the same


class _Item:
    def __init__(self, nodeid: str, *marks: str):
        self.nodeid, self._marks = nodeid, marks

    def get_closest_marker(self, name: str):
        return name if name in self._marks else None


def _kept(tmp_path, monkeypatch, share: str | None, items: list[_Item], durations: dict[str, float]):
    path = tmp_path / "durations.json"
    path.write_text(json.dumps(durations))
    if share is None:
        monkeypatch.delenv(SHARE, raising=False)
    else:
        monkeypatch.setenv(SHARE, share)
    deselected = []
    config = SimpleNamespace(getoption=lambda name: str(path),
                             hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)))
    items = list(items)
    shares_module.pytest_collection_modifyitems(config, items)  # type: ignore[arg-type]
    return [item.nodeid for item in items], [item.nodeid for item in deselected]


def test_each_part_keeps_its_share_and_deselects_the_rest(tmp_path, monkeypatch):
    items = [_Item("x::schemathesis", "own_stack"), _Item("x::fault", "exclusive"),
             _Item("y::a"), _Item("y::b"), _Item("y::c")]
    durations = {"x::schemathesis": 50.0, "x::fault": 10.0, "y::a": 40.0, "y::b": 30.0, "y::c": 25.0}
    kept = {}
    for k in (1, 2, 3):
        kept[k], deselected = _kept(tmp_path, monkeypatch, f"{k}/3", items, durations)
        assert sorted(kept[k] + deselected) == sorted(item.nodeid for item in items)
    assert kept == {1: ["y::a"], 2: ["y::b", "y::c"], 3: ["x::schemathesis", "x::fault"]}
    # Without a share asked (a pytest of one's own, make check): every test.
    assert _kept(tmp_path, monkeypatch, None, items, durations) == ([item.nodeid for item in items], [])
    with pytest.raises(pytest.UsageError):
        _kept(tmp_path, monkeypatch, "4/3", items, durations)


@pytest.mark.parametrize("lanes", [2, 3])
def test_with_more_lanes_the_beside_parts_and_the_alone_part_share_one_pool(tmp_path, monkeypatch, lanes):
    monkeypatch.setenv("RUN_DIR", str(tmp_path / "run"))
    config = StackConfig.from_env()
    besides = [suite.lane_parts(suite.lane_config(config, lane), lane, lanes, tmp_path)[1]
               for lane in range(1, lanes + 1)]
    alone = suite.alone_part(config, lanes, tmp_path)
    pool = [*besides, alone]
    assert [part.share for part in pool] == [(k, lanes + 1) for k in range(1, lanes + 2)]
    assert {part.marks for part in pool} == {suite.BESIDE_OR_ALONE} and all(part.shared for part in pool)
    command = alone.command([])
    assert "--splits" not in command and "--durations-path" in command  # the shares read the durations
    # With one lane the alone part runs after the lane on its stack: nothing to share.
    one = [*suite.lane_parts(config, 1, 1, tmp_path), suite.alone_part(config, 1, tmp_path)]
    assert not any(part.shared for part in one) and "--splits" in one[1].command([])


@pytest.mark.parametrize("shared", [True, False])
def test_a_part_runs_with_its_own_share_and_none_it_was_started_in(tmp_path, monkeypatch, shared):
    monkeypatch.setenv("RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv(SHARE, "2/3")  # as in a pytest of a shared part (a test of the suite's)
    part = suite.Part("beside 1/2", suite.BESIDE_OR_ALONE, 1, StackConfig.from_env(), (1, 3), tmp_path,
                      shared=shared)
    given = {}

    def call(command, *, env, **_):
        given.update(env)
        return 0

    monkeypatch.setattr(suite.subprocess, "call", call)
    part.run([])
    assert given.get(SHARE) == ("1/3" if shared else None)
