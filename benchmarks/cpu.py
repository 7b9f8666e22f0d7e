"""Where a benchmark's CPU goes: the stack's processes, by role, and the load client.

On this machine the load client, nginx, the apps, Redis, MariaDB and the persisters
share two cores, so a row's rate is the cores divided by what one answer costs all of
them together. ``CpuMeter`` reads each process's user + system time (psutil) before
and after a stretch of load, for every process under the stack's supervisord and its
children (the app servers' workers, nginx's), grouped by role; the caller adds the load
client's own (``children_cpu``). A process that exits during the stretch (a worker
restarted) takes its time with it: none does in these benchmarks.
"""

from __future__ import annotations

import os
import re
import resource
import statistics
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass

import psutil

from stack.config import ROOT
from stack.supervisor import Supervisor, descendants

# "apps": the app instances' processes, their request server and Django in it.
ROLES = ("apps", "persisters", "redis", "mariadb", "nginx", "other")


def _role(program: str) -> str:
    if program.startswith("app"):
        return "apps"
    if program.startswith("persist"):
        return "persisters"
    if program.startswith("redis"):
        return "redis"  # both: the locks' and cache's, and the gate's
    return program if program in ROLES else "other"  # zookeeper(s), the race runner


class CpuMeter:
    def __init__(self, supervisor: Supervisor):
        self.supervisor = supervisor

    def snapshot(self) -> Counter:
        """CPU seconds so far, by role, of every process the stack runs."""
        seconds: Counter = Counter()
        for info in self.supervisor.processes():
            if not info["pid"]:
                continue
            try:
                root = psutil.Process(info["pid"])
                for process in (root, *descendants(info["pid"])):
                    times = process.cpu_times()
                    seconds[_role(info["name"])] += times.user + times.system
            except psutil.NoSuchProcess:
                continue
        return seconds


def children_cpu() -> float:
    """CPU seconds of every finished child of this process so far (wrk's, around a run)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def in_process(requests: int, rows: list[str] | None = None, **environment: str) -> dict[str, float]:
    """CPU µs a request, by row, from one run of ``benchmarks.purchase_cpu`` (only
    ``rows``, in that order, if given): the app's own share of a request, through its
    WSGI handler, no server around it."""
    chosen = [f"--row={row}" for row in rows or []]
    result = subprocess.run([sys.executable, "-m", "benchmarks.purchase_cpu", f"--requests={requests}",
                             *chosen], cwd=ROOT, capture_output=True, text=True, check=True,
                            env={**os.environ, **environment})
    rows = {}
    for line in result.stdout.splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) > 3 and re.fullmatch(r"[\d,]+", cells[2]):
            rows[cells[1]] = float(cells[2].replace(",", ""))
    return rows


def alternated(run: int, pairs: list[tuple[str, str]]) -> list[str]:
    """The ``benchmarks.purchase_cpu`` rows of run ``run``: ping first, then each pair,
    in its order in even runs and the other way round in odd ones (a process's first
    rows pay for what it still warms)."""
    return ["ping"] + [row for pair in pairs for row in (pair if run % 2 == 0 else pair[::-1])]


@dataclass(frozen=True)
class Pair:
    """A pair of rows over ``alternated`` runs: each row's median CPU µs a request,
    and each run's ratio of the second to the first."""

    row: str  # the first: the one without
    without: float
    with_it: float
    ratios: list[float]

    @property
    def each(self) -> str:
        return ", ".join(f"{ratio:.2f}" for ratio in self.ratios)


def paired(runs: list[dict[str, float]], pairs: list[tuple[str, str]]) -> list[Pair]:
    """Each pair of rows' medians over ``runs`` (``in_process``'s), and each run's ratio."""
    return [Pair(without, statistics.median(run[without] for run in runs),
                 statistics.median(run[with_it] for run in runs),
                 [run[with_it] / run[without] for run in runs])
            for without, with_it in pairs]

