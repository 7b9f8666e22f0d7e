"""Each part's own tests, then the pool's chunks that it draws (stack.pool)."""

import json
import os
import random
import subprocess
import sys

import pytest

from stack import suite
from stack.config import ROOT, StackConfig
from stack.pool import CHUNK_SECONDS, chunks, shares


def test_the_shares_are_evened_out_longest_first_each_in_the_order_given():
    rng = random.Random(7)
    tests = [f"t{i}" for i in range(200)]
    durations = {test: rng.uniform(0.1, 40) for test in tests}
    cut = shares(tests, durations, 3)
    assert sorted(test for share in cut for test in share) == sorted(tests)  # each once
    assert all(share == sorted(share, key=tests.index) for share in cut)  # in the order given
    took = [sum(durations[test] for test in share) for share in cut]
    # Longest first into the least: no share ends later than the least by more than one test.
    assert max(took) - min(took) <= max(durations.values()), took


def test_a_test_longer_than_a_share_has_a_share_to_itself():
    durations = {"long": 100.0, "a": 10.0, "b": 10.0, "c": 10.0}
    assert shares(list(durations), durations, 3) == [["long"], ["a", "c"], ["b"]]


def test_a_test_without_a_duration_counts_as_their_mean():
    durations = {"a": 30.0, "b": 10.0}
    # "new" counts 20 s: after "a" (30) in the first share, "new" (20) and "b" (10) share the second.
    assert shares(["a", "b", "new"], durations, 2) == [["a"], ["b", "new"]]
    assert shares(["x", "y"], {}, 2) == [["x"], ["y"]]  # none known: each counts the same


def test_the_tests_that_ask_the_same_of_the_apps_go_into_one_share():
    tests = ["a1", "b", "a2", "c", "d"]
    durations = dict.fromkeys(tests, 10.0)
    asked = {"a1": '{"server": "granian"}', "a2": '{"server": "granian"}', "b": "{}"}  # c, d: not recorded
    # a1 and a2 go as one of 20 s; b, c and d, each as it started, one by one around them.
    assert shares(tests, durations, 2, asked) == [["a1", "a2", "d"], ["b", "c"]]
    assert shares(tests, durations, 2) == [["a1", "b", "d"], ["a2", "c"]]  # nothing asked: one by one


def test_a_chunk_is_one_modules_tests_in_a_row_up_to_its_seconds_the_longest_drawn_first():
    durations = {"a::1": 8.0, "a::2": 8.0, "a::3": 8.0, "a::4": 30.0, "b::1": 2.0, "a::5": 1.0}
    tests = list(durations)
    # a::3 would take the first past 20 s; a::4 is longer than that alone; b::1 is another module.
    assert chunks(tests, durations, most=20.0) == [["a::4"], ["a::1", "a::2"], ["a::3"], ["b::1"], ["a::5"]]
    assert chunks(["x::1", "x::2"], {}) == [["x::1", "x::2"]]  # none known: one second each
    assert CHUNK_SECONDS > max(durations[t] for t in tests if t != "a::4")


PARTS_CONFTEST = r"""
import os, time
from pathlib import Path

import pytest

RAN = Path(os.environ["RAN"])


def pytest_collection_finish(session):
    (RAN / ("ready-" + os.environ["PART"])).touch()


@pytest.fixture(autouse=True)
def _both_parts_collected(request):
    # Until both parts are past collection, none runs a test: neither drains the pool
    # before the other starts, however slowly either starts.
    deadline = time.monotonic() + 120
    while len(list(RAN.glob("ready-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    with open(RAN / "ran", "a") as ran:
        ran.write(os.environ["PART"] + " " + request.node.nodeid + "\n")
    yield
"""

PARTS_TESTS = """
import pytest

{tests}

@pytest.mark.stack
def test_drives_a():
    pass

@pytest.mark.stack
def test_drives_b():
    pass

@pytest.mark.exclusive
def test_faults():
    pass
"""


def test_two_parts_run_their_own_share_and_between_them_each_pooled_test_once(tmp_path):
    """Two pytest at once, as two stack parts of make test: each runs its share of the
    stack's tests and draws the pool's chunks until none is left."""
    (tmp_path / "conftest.py").write_text(PARTS_CONFTEST)
    pooled = [f"test_pooled_{i}" for i in range(8)]
    (tmp_path / "test_m.py").write_text(PARTS_TESTS.format(tests="\n".join(
        f"def {name}():\n    pass\n" for name in pooled)))
    ids = [f"test_m.py::{name}" for name in pooled]
    durations = tmp_path / "durations.json"  # a chunk a test: each longer than half a chunk
    durations.write_text(json.dumps({**dict.fromkeys(ids, CHUNK_SECONDS * 0.6),
                                     "test_m.py::test_drives_a": 5.0, "test_m.py::test_drives_b": 5.0}))
    (tmp_path / "pool").mkdir()
    (tmp_path / "ran").touch()
    runs = []
    for k in (1, 2):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "RAN": str(tmp_path), "PART": str(k),
               suite.SHARE: f"{k}/2", suite.POOL: str(tmp_path / "pool")}
        env.pop("DJANGO_SETTINGS_MODULE", None)
        runs.append(subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "stack.pool", "-p", "no:cacheprovider", "-p", "no:django",
             "-m", "not exclusive", "--durations-path", str(durations), "-q", str(tmp_path)],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [run.communicate(timeout=240)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    ran = [line.split() for line in (tmp_path / "ran").read_text().splitlines()]
    by_part = {k: [test for part, test in ran if part == k] for k in ("1", "2")}
    # Its own share first: each stack part one of the tests that drive the stack.
    assert [tests[0] for tests in by_part.values()] in (
        ["test_m.py::test_drives_a", "test_m.py::test_drives_b"],
        ["test_m.py::test_drives_b", "test_m.py::test_drives_a"])
    # Every pooled test once, none twice; the exclusive one in neither (not selected).
    assert sorted(test for _, test in ran if "pooled" in test) == sorted(ids)
    assert all(any("pooled" in test for test in tests) for tests in by_part.values()), by_part
    assert len(list((tmp_path / "pool").iterdir())) == len(ids)  # a chunk each, each taken once


@pytest.mark.parametrize("name", ["stack 1/2", "beside 1/2"])
def test_a_part_runs_with_its_own_share_the_runs_pool_and_no_share_it_was_started_in(tmp_path, monkeypatch,
                                                                                     name):
    monkeypatch.setenv("RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv(suite.SHARE, "2/3")  # as in a pytest of a stack part (a test of the suite's)
    part = {p.name: p for p in suite.lane_parts(StackConfig.from_env(), 1, 2, tmp_path)}[name]
    given = {}

    def call(command, *, env, **_):
        given.update(env, command=command)
        return 0

    monkeypatch.setattr(suite.subprocess, "call", call)
    part.run([])
    assert given.get(suite.SHARE) == ("1/2" if name.startswith("stack") else None)
    assert given[suite.POOL] == str(tmp_path / suite.POOL_DIRECTORY) and part.pool.is_dir()
    assert "--splits" not in given["command"] and "--durations-path" in given["command"]
