"""The whole suite, in lanes that run at once, each on a stack of its own.

``make test`` runs ``python -m stack test --checks [pytest arguments]``: ruff, then
the suite, with the type checker and the docs build beside it. Most of the suite's
time is spent waiting on servers, so it runs in lanes at once (``--lanes``, 2):
lane 1 on the stack the environment names (started if it is not up, stopped after if
so), lane ``k`` on a stack of its own started for the run, its ports those of lane 1
plus ``(k - 1) * LANE_PORT_STEP``. Each lane runs two pytest at once:

1. its stack part: a ``k``-th share of the tests that drive its stack's app
   instances, nginx or watchers (``stack``, marked by conftest.py), shares of equal
   time by ``.test_durations``, one after another, since each may restart the
   instances;
2. its beside part, with a database, Redis databases and a ZooKeeper root of its own
   (``FLASHSALE_TEST_WORKER=1``).

Beside the lanes, the alone part runs the tests that fault a server both pytest of a
lane use or count all it runs (``exclusive``), and the long runs that want a stack to
themselves and restart nothing (``own_stack``: schemathesis): with one lane, alone on
its stack after the lane; with more, on a stack of its own (``alone_config``),
started beside the lanes and removed when that run ends. The exclusive tests mostly
wait on faults and timeouts: on a stack of their own they wait while the lanes load
the machine, and no lane waits for them.

The rest, the tests that drive no stack and fault nothing shared, are a pool: each
part draws from it once its own tests are done, the beside parts from the start, a
chunk of tests at a time, until none is left (``stack.pool``); so the parts end
together, however fast the machine runs each part that day.

The stacks the run starts leave their watchers (Prometheus, its exporters,
Alertmanager, the pager) stopped: a test that reads them asks for ``stack_watchers``,
which starts them on its stack, and such tests run last in their part (conftest.py).

Each part's output is printed when it ends; at the end come each part's time and the
slowest tests, written to ``<run dir>/suite/durations.json`` (``--store-durations``
copies them into ``.test_durations``, and what each stack test asked of the app
instances, by which they run grouped, into ``.test_apps``: ``stack.appgroups``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from . import check
from .appgroups import APPS_ASKED, apps_recorded
from .check import keep_bytecode, warm_bytecode
from .config import ROOT, StackConfig
from .control import clean, down, up
from .cpuquota import cpu_quota
from .machinecpu import MachineCpu
from .suitereport import report
from .supervisor import Supervisor
from .yardstick import loop_seconds

# Lane 2's ports are lane 1's plus this; tests/second_stack.py's stack sits at +100.
LANE_PORT_STEP = 200
DURATIONS = ROOT / ".test_durations"
# Which tests each kind of part may run (-m): its own, and the pool that every part
# draws from (POOLED) once its own are done (stack.pool).
POOLED = "not stack and not exclusive and not own_stack"
STACK = f"stack and not exclusive and not own_stack or {POOLED}"
BESIDE = POOLED
ALONE = f"exclusive or own_stack or {POOLED}"
SHARE = "FLASHSALE_TEST_SHARE"  # "k/n": a stack part's share of the tests that drive its stack
POOL = "FLASHSALE_TEST_POOL"  # the directory where the parts take the pool's chunks
APPS_LEFT = "FLASHSALE_TEST_APPS_LEFT"  # "1": its app instances are not put back (leave_apps)
POOL_DIRECTORY = "pool"  # in the run's suite directory, emptied as the run begins
_printing = threading.Lock()  # a part's log comes out whole, not between another's lines


def say(text: str) -> None:
    with _printing:
        print(text, flush=True)


def lane_config(config: StackConfig, lane: int) -> StackConfig:
    """Lane 1 is ``config``; lane ``k`` has its own run directory and ports."""
    if lane == 1:
        return config
    step = (lane - 1) * LANE_PORT_STEP
    return config.replace(
        run_dir=config.run_dir / f"lane{lane}",
        mysql_port=config.mysql_port + step, redis_port=config.redis_port + step,
        redis_gate_port=config.redis_gate_port + step, zk_port=config.zk_port + step,
        nginx_port=config.nginx_port + step, app_port=config.app_port + step,
        metrics_port=config.metrics_port + step, payprovider_port=config.payprovider_port + step)


def lane_environment(config: StackConfig) -> dict[str, str]:
    """What a pytest of the lane is given: the same variables StackConfig and the
    Django settings read, so that both find the lane's servers."""
    return {**os.environ, **config.port_environment()}


@dataclass
class Part:
    """One pytest run on one lane's stack: its own tests, then what it draws from the
    pool (``out``/pool)."""

    name: str
    marks: str
    worker: int
    config: StackConfig
    share: tuple[int, int] | None  # (k, n): a stack part's share of the tests that drive its stack
    out: Path
    status: int | None = None
    seconds: float = 0.0
    durations: dict[str, float] = field(default_factory=dict)
    asked: dict[str, str] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)  # test: [its pytest's, its stack's] s
    apps_left: bool = False  # APPS_LEFT

    @property
    def log(self) -> Path:
        return self.out / f"{self.name.replace(' ', '-').replace('/', 'of')}.log"

    @property
    def durations_file(self) -> Path:
        return self.log.with_suffix(".json")

    @property
    def apps_file(self) -> Path:
        """Where its pytest writes what each test asked of the app instances (conftest.py)."""
        return self.log.with_suffix(".apps.json")

    @property
    def cpu_file(self) -> Path:
        """Where its pytest writes each test's CPU (stack/testcpu.py)."""
        return self.log.with_suffix(".cpu.json")

    @property
    def pool(self) -> Path:
        """Where every part of the run takes the pool's chunks (stack.pool)."""
        return self.out / POOL_DIRECTORY

    def command(self, pytest_args: list[str]) -> list[str]:
        # The shares and the chunks are cut by the committed durations, read from this
        # file; pytest-split writes this part's own there (--clean-durations).
        self.durations_file.write_text(DURATIONS.read_text() if DURATIONS.exists() else "{}")
        # The checkout's configuration named: pytest would otherwise look for one above
        # the durations file, which sits in the run directory, wherever RUN_DIR puts it.
        return [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "-m", self.marks,
                "-p", "no:cacheprovider", "--store-durations", "--clean-durations",
                "--durations-path", str(self.durations_file), *pytest_args]

    def run(self, pytest_args: list[str]) -> None:
        env = {**lane_environment(self.config), "FLASHSALE_TEST_WORKER": str(self.worker),
               "FLASHSALE_TEST_APPS_OUT": str(self.apps_file), "FLASHSALE_TEST_CPU_OUT": str(self.cpu_file)}
        if self.worker == 0:  # its tests drive the stack: what it uses is theirs
            env["FLASHSALE_TEST_CPU_STACK"] = "1"
        for own in (SHARE, APPS_LEFT):  # its own, not those of a part it runs in
            env.pop(own, None)
        env.update({POOL: str(self.pool), **({SHARE: "{}/{}".format(*self.share)} if self.share else {}),
                    **({APPS_LEFT: "1"} if self.apps_left else {})})
        self.pool.mkdir(exist_ok=True)
        self.apps_file.unlink(missing_ok=True)
        self.cpu_file.unlink(missing_ok=True)
        say(f"[suite] {self.name}: started")
        began = time.monotonic()
        with self.log.open("w") as log:
            self.status = subprocess.call(self.command(pytest_args), cwd=ROOT, env=env,
                                          stdout=log, stderr=subprocess.STDOUT)
        self.seconds = time.monotonic() - began
        if self.durations_file.exists():
            self.durations = json.loads(self.durations_file.read_text())
        if self.apps_file.exists():
            self.asked = json.loads(self.apps_file.read_text())
        if self.cpu_file.exists():
            self.cpu = json.loads(self.cpu_file.read_text())
        say(f"\n----- {self.name}: {self.seconds:.0f} s, {self.verdict} -----\n{self.log.read_text()}")

    @property
    def verdict(self) -> str:
        # 5 is pytest's "no test selected": arguments that pick none of this share.
        return {None: "not run", 0: "passed", 5: "none selected"}.get(self.status, f"failed ({self.status})")

    @property
    def failed(self) -> bool:
        return self.status not in (0, 5)


def alone_config(config: StackConfig, lanes: int) -> StackConfig:
    """The exclusive tests' own stack in a run of ``lanes`` lanes: ports past the
    last lane's, a run directory of its own."""
    return lane_config(config, lanes + 1).replace(run_dir=config.run_dir / "alone")


def lane_parts(config: StackConfig, lane: int, lanes: int, out: Path) -> list[Part]:
    """The parts a lane runs at once: its share of the tests that drive its stack, and
    beside them a part whose tests all come from the pool."""
    return [Part(f"stack {lane}/{lanes}", STACK, 0, config, (lane, lanes), out),
            Part(f"beside {lane}/{lanes}", BESIDE, 1, config, None, out)]


def alone_part(config: StackConfig, lanes: int, out: Path) -> Part:
    """The exclusive tests and the ``own_stack`` ones, every one: on the lane's stack
    when there is one lane, on a stack of their own when there are more. The
    exclusive tests mostly wait, so the long runs that restart nothing (schemathesis)
    join them there rather than lengthen a lane's stack part. After them it draws from
    the pool, as every part does (with one lane, the lane has drawn it all)."""
    return Part("alone", ALONE, 0, config if lanes == 1 else alone_config(config, lanes), None, out)


def leave_apps(shares: list[list[Part]], alone: Part, ours: list[StackConfig]) -> None:
    """The last part to drive each stack this run stops (``ours``) leaves its instances as
    they are: with one lane, the alone part; with more, each lane's stack part and the
    alone part, whose stack goes once it ends (``run_alone``)."""
    alone.apps_left = len(shares) > 1 or alone.config in ours
    if len(shares) > 1:
        for stack_part, _ in shares:
            stack_part.apps_left = stack_part.config in ours


def run_lane(parts: list[Part], pytest_args: list[str], *, then: Part | None = None) -> None:
    """The lane's parts at once; ``then`` after them (one lane's exclusive tests)."""
    threads = [threading.Thread(target=part.run, args=(pytest_args,)) for part in parts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if then is not None:
        then.run(pytest_args)


def run_alone(part: Part, pytest_args: list[str], out: Path) -> None:
    """The exclusive tests on a stack started for them, removed (its logs kept) once
    they end: its servers cost the lanes no CPU after that. A stack that does not
    start leaves the part not run, which fails the suite."""
    try:
        up(part.config, watched=False)
        part.run(pytest_args)
    except Exception as e:  # noqa: BLE001 (said, and the part stays "not run")
        say(f"[suite] {part.name}: its stack did not start: {e!r}")
    finally:
        _removed(part.config, out)


def logs_kept(config: StackConfig, into: Path) -> None:
    """A lane's server logs, copied out of its run directory before that goes: what a
    failed test's servers said stays readable (``<run dir>/suite/lane<k>-logs``)."""
    logs = config.run_dir / "logs"
    if logs.is_dir():
        shutil.copytree(logs, into / f"{config.run_dir.name}-logs", dirs_exist_ok=True)


def _removed(config: StackConfig, out: Path) -> None:
    logs_kept(config, out)
    clean(config)


@contextmanager
def stacks_up(configs: list[StackConfig], out: Path) -> Iterator[list[StackConfig]]:
    """Every lane's stack up, all at once (a start mostly waits: on a server to answer,
    on migrations); afterwards, at once too, down what this run started, and the lanes
    it made removed with what they made outside their run directories, their logs
    kept in ``out``. Yields the stacks it stops after."""
    lane_one_ours = not Supervisor(configs[0]).is_running()
    ours = configs if lane_one_ours else configs[1:]
    ends = [partial(down, configs[0])] if lane_one_ours else []
    ends += [partial(_removed, config, out) for config in configs[1:]]
    began = time.monotonic()
    try:
        with ThreadPoolExecutor(len(configs)) as pool:
            starts = [pool.submit(up, config, watched=False) for config in configs]
        for start in starts:
            start.result()  # the first that failed raises: every stack is cleaned up
        say(f"[suite] the lanes' stacks up in {time.monotonic() - began:.1f} s")
        yield ours
    finally:
        began = time.monotonic()
        with ThreadPoolExecutor(max(len(ends), 1)) as pool:
            list(pool.map(lambda end: end(), ends))  # each ends; then the first that failed raises
        say(f"[suite] the stacks this run started stopped in {time.monotonic() - began:.1f} s")


@contextmanager
def burners(count: int) -> Iterator[list[int]]:
    """``count`` processes that spin as long as the suite runs (``make test-slow``):
    the kernel shares the cores between runnable processes, so the suite, which runs
    many, gets most of the machine, not half."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    pids = [process.pid for process in spinning]
    say(f"[suite] {count} CPU burners beside the suite: pids {' '.join(map(str, pids))}")
    try:
        yield pids
    finally:
        for process in spinning:
            process.kill()
            process.wait()


def checks_commands(site: str) -> list[list[str]]:
    """make check's type checker, then its docs build, into ``site``."""
    mypy, docs = check.TYPES_AND_DOCS
    return [mypy, [*docs, "--site-dir", site]]


@contextmanager
def checks_beside(enabled: bool) -> Iterator[check.Part | None]:
    """The type checker and the docs build (``--checks``, as make test asks) in a
    thread of their own while the stacks start and the suite runs: they cost CPU as a
    share of the tests does, and the suite no longer waits for them first. The docs
    are built in a directory of their own: a test builds the lane's site, which
    nginx serves, while this runs."""
    if not enabled:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="flashsale-docs-check-") as site:
        part = check.Part("types, docs", checks_commands(site), say=say)
        thread = threading.Thread(target=part.run)
        thread.start()
        try:
            yield part
        finally:
            thread.join()


# Set for the suite's stacks and its pytest runs (the apps take the FLASHSALE_ variables
# of whoever starts them): PBKDF2 was most of the apps' work in a schemathesis run.
SUITE_ENVIRONMENT = {"FLASHSALE_QUICK_PASSWORD_HASHING": "true"}


# Past six parameters: each a flag of python -m stack test.
def main(pytest_args: list[str], *, lanes: int, store_durations: bool, burn: int = 0,  # noqa: PLR0913
         checks: bool = False, cpu: float | None = None) -> int:
    """The suite in ``lanes`` lanes (``burn``: that many CPU burners beside it; ``cpu``:
    under a quota of that share of the machine's cores, ``stack.cpuquota``). With
    ``checks``, ruff first (seconds, and the cheapest to fail: nothing starts if it
    does), then the type checker and the docs build beside the suite."""
    for name, value in SUITE_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    keep_bytecode()  # before the stacks start: their apps compile the project once too
    config = StackConfig.from_env()
    configs = [lane_config(config, lane) for lane in range(1, lanes + 1)]
    out = config.dir("suite")
    shutil.rmtree(out / POOL_DIRECTORY, ignore_errors=True)  # a run before's chunks, all taken
    loop, began = loop_seconds(), time.monotonic()  # the yardstick: before the quota, the burners
    with ExitStack() as beside:
        if cpu:
            say(f"[suite] under a CPU quota: {cpu:g} of the machine's cores "
                f"({beside.enter_context(cpu_quota(cpu))})")
        machine = beside.enter_context(MachineCpu())
        if burn:
            beside.enter_context(burners(burn))
        if checks:
            lint = check.Part("ruff", [check.LINT], say=say)
            lint.run()
            if lint.failed:
                return lint.status or 1
        say(f"[suite] the bytecode compiled once, before the parts start at once: {warm_bytecode():.0f} s")
        checked = beside.enter_context(checks_beside(checks))
        ours = beside.enter_context(stacks_up(configs, out))
        shares = [lane_parts(c, lane, lanes, out) for lane, c in enumerate(configs, start=1)]
        alone = alone_part(config, lanes, out)
        leave_apps(shares, alone, ours)
        if lanes == 1:
            threads = [threading.Thread(target=run_lane, args=(shares[0], pytest_args),
                                        kwargs={"then": alone})]
        else:
            threads = [threading.Thread(target=run_alone, args=(alone, pytest_args, out)),
                       *(threading.Thread(target=run_lane, args=(parts, pytest_args)) for parts in shares)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    parts = [*(part for parts in shares for part in parts), alone]
    say("\n" + report(parts, time.monotonic() - began, out, machine, checked, loops=(loop, loop_seconds())))
    if store_durations:
        kept = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
        kept.update(json.loads((out / "durations.json").read_text()))
        DURATIONS.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
        asked = apps_recorded()
        asked.update({test: key for part in parts for test, key in part.asked.items()})
        APPS_ASKED.write_text(json.dumps(asked, indent=1, sort_keys=True) + "\n")
        say(f"[suite] {DURATIONS.name}, {APPS_ASKED.name}: this run's durations and apps written in")
    return exit_status(parts, checked)


def exit_status(parts: list[Part], checks: check.Part | None = None) -> int:
    """A failed part's status (1 for one that never ran), else the checks' if they
    failed, else 0; 5 when no part selected a test."""
    failed = [part for part in parts if part.failed]
    if failed:
        return max(part.status or 1 for part in failed)
    if checks is not None and checks.failed:
        return checks.status or 1
    return 0 if any(part.status == 0 for part in parts) else 5
