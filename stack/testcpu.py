"""What each test costs in CPU, for ``make test``'s report (a pytest plugin, loaded by
the root conftest.py): the suite keeps both cores busy, so its time is CPU, and the
tests that cost the most of it are where it can be shortened.

A test's CPU is what its pytest process and everything it started used from its
setup to its teardown (children still running, and those that ended), and, for a
test that drives the stack (in a stack part: ``FLASHSALE_TEST_CPU_STACK``), what its
lane's stack used meanwhile: the supervisord of its run directory and every process under it, those
restarted included. The stack's figure includes what the beside part asked of the
same MariaDB, Redis and ZooKeeper at the same time, and the stack's own idle work
(Prometheus, the writers' loops); a server that detaches from its parent (a test
host's) is not counted. Written, per test, where ``FLASHSALE_TEST_CPU_OUT`` says.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from .config import StackConfig
from .supervisor import Supervisor, descendants


def tree_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and every process under it: each live one's own and what
    it has reaped of its ended children (an ended process's whole tree, once waited
    for)."""
    try:
        root = psutil.Process(pid)
        processes = [root, *descendants(pid)]
    except psutil.NoSuchProcess:
        return 0.0
    seconds = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:  # ended between the listing and now: its parent's now
            continue
        seconds += times.user + times.system + times.children_user + times.children_system
    return seconds


class CpuPerTest:
    """Per test: (pytest's, the stack's) CPU seconds."""

    def __init__(self, out: Path, stack: StackConfig | None):
        self.out = out
        self.stack = Supervisor(stack) if stack is not None else None
        self.seconds: dict[str, list[float]] = {}

    def now(self, stack: bool) -> tuple[float, float]:
        """pytest's tree's CPU seconds, and with ``stack`` the lane's stack's."""
        daemon = self.stack.daemon_pid() if stack and self.stack is not None else None
        return tree_seconds(os.getpid()), tree_seconds(daemon) if daemon else 0.0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        # A test from the pool (stack.pool) drives no stack: what the stack did meanwhile
        # is not its, and its walk (every thread of every server) is not read for it.
        driven = item.get_closest_marker("stack") is not None
        own, stack = self.now(driven)
        yield
        own_after, stack_after = self.now(driven)
        self.seconds[item.nodeid] = [round(own_after - own, 2), round(max(stack_after - stack, 0.0), 2)]

    def pytest_sessionfinish(self) -> None:
        self.out.write_text(json.dumps(self.seconds, indent=1, sort_keys=True) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    if out := os.environ.get("FLASHSALE_TEST_CPU_OUT"):
        stack = StackConfig.from_env() if os.environ.get("FLASHSALE_TEST_CPU_STACK") else None
        config.pluginmanager.register(CpuPerTest(Path(out), stack), "flashsale-test-cpu")
