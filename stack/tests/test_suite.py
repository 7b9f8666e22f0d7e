"""make test's lanes (stack.suite): stacks apart from each other, parts reported whole."""

import contextlib
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression  # how -m reads a part's marks

from stack import suite, suitereport
from stack.config import StackConfig
from stack.machinecpu import UNSEEN, MachineCpu
from tests import second_stack

LANES = 4


def listening(config: StackConfig) -> set[int]:
    """Every loopback port a stack so configured listens on."""
    return {config.mysql_port, config.redis_port, config.redis_gate_port, config.nginx_port,
            config.payprovider_port, config.alertmanager_port, config.pager_port,
            *range(config.zk_port, config.zk_port + config.zk_nodes),
            *(config.app_port_of(name) for name in config.app_names),
            *range(config.metrics_port, config.expirer_metrics_port + 1)}


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("RUN_DIR", str(tmp_path / "run"))
    return StackConfig.from_env()


def test_no_two_lanes_nor_their_second_stacks_share_a_port_or_a_run_directory(config, monkeypatch):
    stacks = []
    lanes = [suite.lane_config(config, n) for n in range(1, LANES + 1)]
    for lane in [*lanes, suite.alone_config(config, LANES)]:
        for name, value in suite.lane_environment(lane).items():
            monkeypatch.setenv(name, value)  # as the lane's pytest runs
        stacks += [lane, second_stack.config_for(lane.run_dir / "second")]
    ports = [listening(stack) for stack in stacks]
    for i, mine in enumerate(ports):
        for j, theirs in enumerate(ports[i + 1:], start=i + 1):
            assert not mine & theirs, (i, j, sorted(mine & theirs))
    assert len({stack.run_dir for stack in stacks}) == len(stacks)
    assert stacks[0] == config  # lane 1 is the stack the environment names


def test_a_lanes_pytest_finds_its_stack_where_the_settings_look(config):
    lane = suite.lane_config(config, 2)
    env = suite.lane_environment(lane)
    for variable, port in (("MYSQL_PORT", lane.mysql_port), ("REDIS_PORT", lane.redis_port),
                           ("REDIS_GATE_PORT", lane.redis_gate_port), ("ZK_PORT", lane.zk_port),
                           ("NGINX_PORT", lane.nginx_port), ("PAYPROVIDER_PORT", lane.payprovider_port)):
        assert env[variable] == str(port)
    assert env["RUN_DIR"] == str(lane.run_dir)


def _part(name: str, status: int | None, seconds: float, durations: dict[str, float], tmp_path: Path):
    part = suite.Part(name, "stack", 0, StackConfig.from_env(), (1, 2), tmp_path)
    part.status, part.seconds, part.durations = status, seconds, durations
    return part


def test_a_lanes_logs_are_kept_out_of_its_run_directory_before_it_goes(config, tmp_path):
    lane = suite.lane_config(config, 2)
    (lane.run_dir / "logs").mkdir(parents=True)
    (lane.run_dir / "logs" / "zookeeper.log").write_text("what it said\n")
    out = tmp_path / "suite"
    out.mkdir()
    suite.logs_kept(lane, out)
    assert (out / "lane2-logs" / "zookeeper.log").read_text() == "what it said\n"
    suite.logs_kept(suite.lane_config(config, 3), out)  # a lane that made no logs: nothing
    assert sorted(p.name for p in out.iterdir()) == ["lane2-logs"]


@pytest.mark.parametrize("fails", [None, 2])
def test_the_lanes_stacks_start_at_once_and_go_at_once_after_whatever_failed(
        fails, config, tmp_path, monkeypatch):
    lanes = [suite.lane_config(config, lane) for lane in (1, 2, 3)]
    together = threading.Barrier(len(lanes), timeout=10)  # broken unless every start is under way
    calls = []

    def up(stack, *, watched=True):
        together.wait()
        calls.append(("up", stack.run_dir, watched))
        if fails and stack == lanes[fails - 1]:
            raise RuntimeError("no ZooKeeper")

    apart = threading.Barrier(len(lanes), timeout=10)  # broken unless every stop is under way

    def ending(name):
        def end(stack):
            apart.wait()
            calls.append((name, stack.run_dir))
        return end

    monkeypatch.setattr(suite, "up", up)
    for name in ("down", "clean"):
        monkeypatch.setattr(suite, name, ending(name))
    monkeypatch.setattr(suite, "logs_kept", lambda stack, out: calls.append(("logs kept", stack.run_dir)))
    with pytest.raises(RuntimeError) if fails else contextlib.nullcontext():
        with suite.stacks_up(lanes, tmp_path) as ours:
            assert ours == lanes  # lane 1's was not running: this run stops every one
            calls.append(("tests", None))
    ups = {("up", stack.run_dir, False) for stack in lanes}
    assert set(calls[:3]) == ups
    tests = [] if fails else [("tests", None)]
    assert calls[3:3 + len(tests)] == tests
    after = calls[3 + len(tests):]
    # Lane 1's stack was not running before: it goes down; the others go, their logs kept
    # first; all at once.
    assert sorted(after) == sorted([("logs kept", lanes[2].run_dir), ("clean", lanes[2].run_dir),
                                    ("logs kept", lanes[1].run_dir), ("clean", lanes[1].run_dir),
                                    ("down", lanes[0].run_dir)])
    for lane in lanes[1:]:
        assert after.index(("logs kept", lane.run_dir)) < after.index(("clean", lane.run_dir))


def test_the_report_names_each_parts_time_and_the_slowest_tests_of_all(config, tmp_path):
    durations = {f"a.py::test_{i}": float(i) for i in range(30)}
    parts = [_part("stack 1/2", 0, 100, dict(list(durations.items())[:15]), tmp_path),
             _part("beside 1/2", 5, 50, dict(list(durations.items())[15:]), tmp_path),
             _part("alone 1/2", 1, 20, {}, tmp_path)]
    text = suitereport.report(parts, 170, tmp_path, loops=(0.2, 0.254))
    assert text.splitlines()[0].endswith("; the yardstick 0.20 s before, 0.25 s after -----")
    assert "stack 1/2" in text and "100 s  passed" in text
    assert "none selected" in text and "failed (1)" in text
    lines = text.splitlines()
    slowest = lines.index(next(line for line in lines if "slowest" in line))
    costliest = lines.index(next(line for line in lines if "the most CPU" in line))
    listed = [line.split()[-1] for line in lines[slowest + 1:costliest]]
    assert listed == [f"a.py::test_{i}" for i in range(29, 29 - suitereport.SLOWEST, -1)]
    assert (tmp_path / "durations.json").read_text().count("a.py::test_") == 30


def test_the_report_ranks_the_tests_by_their_cpu_their_pytests_and_their_stacks(config, tmp_path):
    parts = [_part("stack 1/2", 0, 100, {}, tmp_path), _part("beside 1/2", 0, 50, {}, tmp_path)]
    parts[0].cpu = {f"s.py::test_{i}": [1.0, float(i)] for i in range(15)}  # the stack's CPU counts
    parts[1].cpu = {f"b.py::test_{i}": [i + 0.5, 0.0] for i in range(15)}
    lines = suitereport.report(parts, 100, tmp_path).splitlines()
    costliest = lines[lines.index(next(line for line in lines if "the most CPU" in line)) + 1:]
    assert costliest[:3] == ["     15.0 s  (1.0 + 14.0)  s.py::test_14",
                             "     14.5 s  (14.5 + 0.0)  b.py::test_14",
                             "     14.0 s  (1.0 + 13.0)  s.py::test_13"]
    assert len(costliest) == suitereport.SLOWEST
    assert json.loads((tmp_path / "cpu.json").read_text())["b.py::test_3"] == [3.5, 0.0]


@pytest.mark.parametrize(("statuses", "expected"), [
    ((0, 0, 5), 0), ((5, 5, 5), 5), ((0, 1, 0), 1), ((2, 0, 1), 2), ((0, None, 0), 1)])
def test_the_suite_fails_when_any_part_fails_or_never_ran(statuses, expected, config, tmp_path):
    parts = [_part(f"p{i}", status, 1, {}, tmp_path) for i, status in enumerate(statuses)]
    assert suite.exit_status(parts) == expected


@pytest.mark.parametrize("fails", [False, True])
def test_the_checks_run_beside_the_suite_and_fail_it_when_they_fail(fails, config, tmp_path, monkeypatch):
    began = tmp_path / "suite began"
    # The first check waits for what the suite's body makes: run first, it would time out.
    there = f"pathlib.Path({str(began)!r}).exists()"
    waits = f"import pathlib, time; [time.sleep(0.05) for _ in range(600) if not {there}]"
    checks = [[sys.executable, "-c", f"{waits}; assert {there}"],
              [sys.executable, "-c", f"import sys; sys.exit({int(fails)})"]]
    monkeypatch.setattr(suite, "checks_commands", lambda site: [*checks, ["test", "-d", site]])
    said = []
    monkeypatch.setattr(suite, "say", said.append)
    with suite.checks_beside(True) as part:
        began.touch()
    assert part is not None and part.failed == fails
    # Its output whole, up to the command that failed (the site directory made for the build).
    assert said and said[0].startswith("----- types, docs: ") and said[0].count("$ ") == (2 if fails else 3)
    parts = [_part("stack 1/2", 0, 1, {}, tmp_path)]
    assert suite.exit_status(parts, part) == (1 if fails else 0)
    line = f"  {'types, docs':<12} {part.seconds:7.0f} s  {'failed (1)' if fails else 'passed'}"
    assert line in suitereport.report(parts, 1, tmp_path, checks=part).splitlines()
    with suite.checks_beside(False) as nothing:
        assert nothing is None


def test_the_burners_spin_while_the_suite_runs_and_stop_with_it():
    with suite.burners(2) as pids:
        assert len(pids) == 2
        for pid in pids:
            os.kill(pid, 0)  # alive
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


class _Recorded:
    """A part that says when it ran."""

    def __init__(self, name: str, ran: list[str], config: StackConfig | None = None):
        self.name, self._ran, self.config = name, ran, config
        self.status: int | None = None

    def run(self, pytest_args: list[str]) -> None:
        self._ran.append(self.name)
        self.status = 0


def test_one_lane_runs_its_exclusive_tests_after_the_others_on_its_stack(config, tmp_path):
    ran = []
    suite.run_lane([_Recorded("stack", ran), _Recorded("beside", ran)], [], then=_Recorded("alone", ran))
    assert ran[-1] == "alone" and sorted(ran) == ["alone", "beside", "stack"]
    assert suite.alone_part(config, 1, tmp_path).config == config


@pytest.mark.parametrize("starts", [True, False])
def test_with_more_lanes_the_exclusive_tests_run_on_a_stack_started_for_them_and_removed(
        starts, config, tmp_path, monkeypatch):
    alone = suite.alone_part(config, 2, tmp_path)
    assert alone.config == suite.alone_config(config, 2) != config
    assert alone.config.run_dir not in {suite.lane_config(config, n).run_dir for n in (1, 2)}
    calls = []

    def up(stack, *, watched=True):
        calls.append(("up", stack.run_dir, watched))
        if not starts:
            raise RuntimeError("no ZooKeeper")

    monkeypatch.setattr(suite, "up", up)
    monkeypatch.setattr(suite, "logs_kept", lambda stack, out: calls.append(("logs kept", stack.run_dir)))
    monkeypatch.setattr(suite, "clean", lambda stack: calls.append(("clean", stack.run_dir)))
    part = _Recorded("alone", calls, alone.config)
    suite.run_alone(part, [], tmp_path)  # type: ignore[arg-type]
    where = alone.config.run_dir
    # Its watchers left stopped: a test that reads them starts them (conftest.py).
    assert calls == [("up", where, False), *(["alone"] if starts else []),
                     ("logs kept", where), ("clean", where)]
    # A stack that did not start leaves the part not run: the suite fails (exit_status).
    assert (part.status == 0) is starts


@pytest.mark.parametrize("lanes", [1, 2])
@pytest.mark.parametrize("lane_one_ours", [True, False])
def test_the_last_part_to_drive_a_stack_the_run_stops_leaves_its_instances_unrestored(
        lanes, lane_one_ours, config, tmp_path):
    configs = [suite.lane_config(config, lane) for lane in range(1, lanes + 1)]
    ours = configs if lane_one_ours else configs[1:]
    shares = [suite.lane_parts(c, lane, lanes, tmp_path) for lane, c in enumerate(configs, start=1)]
    alone = suite.alone_part(config, lanes, tmp_path)
    suite.leave_apps(shares, alone, ours)
    left = {part.name for part in [*(p for parts in shares for p in parts), alone] if part.apps_left}
    if lanes == 1:  # the alone part drives lane 1's stack after its stack part
        assert left == ({"alone"} if lane_one_ours else set())
    else:  # a stack of its own for the alone part; lane 1's stays up if it was before
        assert left == {"alone", "stack 2/2", *(["stack 1/2"] if lane_one_ours else [])}


@pytest.mark.parametrize("lanes", [1, 2, 3])
def test_every_test_is_one_kind_of_parts_own_or_in_every_parts_pool_whatever_its_marks(config, tmp_path,
                                                                                      lanes):
    parts = [*(part for lane in range(1, lanes + 1)
               for part in suite.lane_parts(suite.lane_config(config, lane), lane, lanes, tmp_path)),
             suite.alone_part(config, lanes, tmp_path)]
    assert [part.share for part in parts if part.name.startswith("stack")] == [(k, lanes) for k in
                                                                                range(1, lanes + 1)]
    for marks in itertools.chain.from_iterable(
            itertools.combinations(("stack", "exclusive", "own_stack", "hosted"), n) for n in range(5)):
        taking = {part.name.split()[0] for part in parts
                  if Expression.compile(part.marks).evaluate(lambda name, marks=marks, **_: name in marks)}
        if "exclusive" in marks or "own_stack" in marks:
            assert taking == {"alone"}, marks
        elif "stack" in marks:
            assert taking == {"stack"}, marks  # each stack part a share of them (stack.pool)
        else:
            assert taking == {"stack", "beside", "alone"}, marks  # the pool: whichever part comes free


# Past the suite's 300 s: the run's own timeout below bounds a hang, not the machine's speed.
@pytest.mark.timeout(960)
def test_a_part_collects_this_checkouts_tests_wherever_its_run_directory_is(tmp_path, monkeypatch):
    """Its durations file lies in the run directory, which RUN_DIR may put outside the
    checkout: pytest still takes the checkout's configuration, not one it finds there."""
    monkeypatch.setenv("RUN_DIR", str(tmp_path / "elsewhere"))
    out = tmp_path / "elsewhere" / "suite"
    out.mkdir(parents=True)
    part = suite.Part("beside 1/1", "not server", 1, StackConfig.from_env(), (1, 1), out)
    # No path given, as make test gives none; and none of this pytest's settings: the
    # configuration found says which tests and which Django settings.
    # Nor the share of the part this test runs in, were it one (stack.pool).
    monkeypatch.setenv(suite.SHARE, "2/3")
    env = {k: v for k, v in os.environ.items()
           if k not in ("DJANGO_SETTINGS_MODULE", "PYTEST_ADDOPTS", suite.SHARE)}
    # It imports every test module: past two minutes beside make test-slow. The bound is a hang's.
    done = subprocess.run(part.command(["--collect-only", "-q", "-k", "wherever_its_run_directory"]),
                          cwd=suite.ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "stack/tests/test_suite.py::test_a_part_collects_this_checkouts_tests" in done.stdout


def test_the_report_ends_with_the_machines_cpu_by_what_used_it(config, tmp_path):
    parts = [_part("stack 1/2", 0, 100, {}, tmp_path)]
    with MachineCpu(period=3600) as machine:  # looked at as it starts and ends
        time.sleep(0.2)
    lines = suitereport.report(parts, 100, tmp_path, machine).splitlines()
    machine_at = lines.index(next(line for line in lines if "the machine's CPU" in line))
    assert "of CPU in" in lines[machine_at + 1] and len(lines) > machine_at + 2
    kept = json.loads((tmp_path / "machine-cpu.json").read_text())
    listed = [line.split("%  ", 1)[1] for line in lines[machine_at + 2:]]
    assert UNSEEN in kept and listed == list(kept)[:len(listed)], (listed, kept)
    commands = json.loads((tmp_path / "machine-cpu-commands.json").read_text())
    assert commands and {"command", "role", "seconds", "processes"} == set(commands[0])


@pytest.mark.parametrize("left", [True, False])
def test_a_part_tells_its_pytest_to_leave_the_instances_only_when_it_is_marked(left, config, tmp_path,
                                                                               monkeypatch):
    monkeypatch.setenv(suite.APPS_LEFT, "1")  # a run inside a part's: not this part's to inherit
    given = {}

    def call(command, *, env, **kwargs):
        given.update(env)
        return 0

    monkeypatch.setattr(suite.subprocess, "call", call)
    monkeypatch.setattr(suite, "say", lambda text: None)
    part = suite.lane_parts(config, 1, 1, tmp_path)[0]
    part.apps_left = left
    part.run([])
    assert (given.get(suite.APPS_LEFT) == "1") is left
