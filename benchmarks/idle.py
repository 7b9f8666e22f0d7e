"""What the running stack costs while nothing asks it anything: each program's CPU and
how often its threads wake, over ``--seconds``.

    python -m benchmarks.idle [--seconds 30]     (the stack must be up: make up)

Each program of the stack's supervisor, with every process under it (a gunicorn
master and its workers, nginx's), is read from /proc twice: its CPU (user and system
time) and its threads' context switches, voluntary and not. A thread that sleeps and
wakes switches once a wake, so the switches a second are how often the program wakes;
each wake costs a turn of its loop, and on a busy machine a cold cache too (the
suite's stacks idle beside its tests). The supervisor itself is a row of its own.
Send nothing to the stack meanwhile: its answers would count.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import psutil

from stack.config import StackConfig
from stack.servers import StackError
from stack.supervisor import Supervisor, descendants
from stack.testcpu import tree_seconds


class Reading(NamedTuple):
    cpu: float  # seconds, user and system, of every process read
    switches: int  # context switches of every thread of those processes


SUPERVISOR = "supervisord"


def read(pid: int, *, alone: bool = False) -> Reading:
    """The CPU of ``pid`` and every process under it (``stack.testcpu.tree_seconds``:
    the ended children reaped too), or with ``alone`` its own only, and the context
    switches of those processes' threads; a process that ended meanwhile counts as
    nothing."""
    try:
        root = psutil.Process(pid)
        own = root.cpu_times()
        processes = [root] if alone else [root, *descendants(pid)]
    except psutil.NoSuchProcess:
        return Reading(0.0, 0)
    cpu = own.user + own.system if alone else tree_seconds(pid)
    return Reading(cpu, sum(_switches(process.pid) for process in processes))


def _switches(pid: int) -> int:
    """The context switches, voluntary and not, of every thread of ``pid``."""
    try:
        threads = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return 0
    switches = 0
    for thread in threads:
        try:
            status = (thread / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        switches += sum(int(line.split()[1]) for line in status.splitlines()
                        if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")))
    return switches


def read_all(pids: Mapping[str, int]) -> dict[str, Reading]:
    """Each program's reading; the supervisor's without the programs under it."""
    return {name: read(pid, alone=name == SUPERVISOR) for name, pid in pids.items()}


def programs(supervisor: Supervisor) -> dict[str, int]:
    """Each running program's process id, and the supervisor's own (its children left
    out: they are the programs)."""
    running = {info["name"]: info["pid"] for info in supervisor.processes() if info["pid"]}
    daemon = supervisor.daemon_pid()
    if daemon is None:
        raise StackError("the stack is not running: make up")
    return {SUPERVISOR: daemon, **running}


def table(before: Mapping[str, Reading], after: Mapping[str, Reading], seconds: float) -> list[str]:
    """One row a program read both times, the costliest first, then their sum."""
    rows = sorted(((after[name].cpu - before[name].cpu, after[name].switches - before[name].switches, name)
                   for name in before.keys() & after.keys()), reverse=True)
    lines = ["| program | % of a core | wakes a second |", "|---|---:|---:|"]
    lines += [f"| {name} | {100 * cpu / seconds:.2f} | {switches / seconds:,.1f} |"
              for cpu, switches, name in rows]
    cpu, switches = sum(row[0] for row in rows), sum(row[1] for row in rows)
    lines.append(f"| **the stack** | **{100 * cpu / seconds:.2f}** | **{switches / seconds:,.1f}** |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to watch (default 30)")
    args = parser.parse_args(argv)
    supervisor = Supervisor(StackConfig.from_env())
    pids = programs(supervisor)
    before, started = read_all(pids), time.monotonic()
    time.sleep(args.seconds)
    after = read_all(pids)
    seconds = time.monotonic() - started
    print(f"`python -m benchmarks.idle --seconds {args.seconds:g}`: the stack idle over {seconds:.1f} s\n")
    print("\n".join(table(before, after, seconds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
