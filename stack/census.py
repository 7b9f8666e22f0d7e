"""Every process's CPU over one command, each counted whole as it ended: the kernel
sends a record for every process that ends, however briefly it lived, with the CPU
the scheduler gave it (``stack.taskstats``); a look every quarter second reads the
command lines (``stack.machinecpu``'s looks), so that each record gets its command's
role. The suite's own report looks every 2 s and calls what ended between two looks
"not seen"; this says what it was.

    python -m stack.census [--top 40] [--short 30] -- make test-slow     (as root)

Every census gets every record, so one run by the command (the suite's tests of
this one, in a census of the suite) takes nothing from it. A process still running
when the command ends is not counted (the suite's stacks stop every server they
started). A process never seen by a look counts under its program's name (the kernel
keeps 15 characters of it), in brackets.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass

from .machinecpu import MachineCpu
from .taskstats import Exited, Processes

LOOK_PERIOD = 0.25
SHORT = 2.0  # seconds: what the suite's looks, 2 s apart, may miss
CLOCKS_APART = 0.02  # the most a record's start and a look's part, a second of life


@dataclass
class Row:
    name: str  # a role, or a command line (``by_command``)
    seconds: float = 0.0
    processes: int = 0
    short_seconds: float = 0.0  # of those that lived under SHORT
    short_processes: int = 0


def by_role(exited: list[Exited], looked: MachineCpu) -> list[Row]:
    """The CPU of the processes that ended, by role, the most first."""
    return _tally(exited, looked, "role")


def by_command(exited: list[Exited], looked: MachineCpu) -> list[Row]:
    """The same by command line, as the looks kept it."""
    return _tally(exited, looked, "command")


def _tally(exited: list[Exited], looked: MachineCpu, by: str) -> list[Row]:
    """``by``: what of a look's process names its row, its ``role`` or its ``command``."""
    pids: dict[int, list[tuple[float, str]]] = {}
    for (pid, started), seen in looked.seen.items():
        pids.setdefault(pid, []).append((started, getattr(seen, by)))
    rows: dict[str, Row] = {}
    for process in exited:
        # The record's start is the wall clock at its end less its lifetime, and the
        # look's from the boot's: on a machine whose wall clock is steered they part by
        # seconds over a long life. The closest of the PID's starts within that.
        near = [(abs(started - process.started), name) for started, name in pids.get(process.pid, ())]
        near = [(apart, name) for apart, name in near if apart <= 2 + process.alive * CLOCKS_APART]
        named = min(near)[1] if near else f"[{process.program}]"
        row = rows.setdefault(named, Row(named))
        row.seconds += process.cpu
        row.processes += 1
        if process.alive < SHORT:
            row.short_seconds += process.cpu
            row.short_processes += 1
    return sorted(rows.values(), key=lambda row: -row.seconds)


def report(rows: list[Row], top: int, lost: int = 0) -> str:
    """The table of ``rows``; ``lost``: the times records were lost (the listener's
    socket full), said first, since every figure below is then short."""
    total = sum(row.seconds for row in rows)
    short = sum(row.short_seconds for row in rows)
    out = [f"records lost {lost} times: the socket's buffer was full, so the figures below are short"
           ] if lost else []
    out += [f"{sum(row.processes for row in rows):,} processes ended, {total:,.0f} s of CPU; "
            f"{sum(row.short_processes for row in rows):,} of them lived under {SHORT:g} s: {short:,.0f} s",
            f"{'CPU s':>8} {'share':>7} {'processes':>9}   {f'under {SHORT:g} s':>15}   role"]
    out += [f"{row.seconds:8.1f} {100 * row.seconds / total if total else 0:5.0f} % {row.processes:9,}   "
            f"{row.short_seconds:7.1f} s {row.short_processes:6,}   {row.name}" for row in rows[:top]]
    if len(rows) > top:
        rest = rows[top:]
        out.append(f"{sum(row.seconds for row in rest):8.1f}        {sum(row.processes for row in rest):9,}"
                   f"                      {len(rest)} more roles")
    return "\n".join(out)


def short_commands(rows: list[Row], top: int) -> str:
    """The ``top`` command lines of ``rows`` by the CPU of their short processes."""
    rows = sorted((row for row in rows if row.short_processes), key=lambda row: -row.short_seconds)
    return "\n".join(f"{row.short_seconds:8.1f} s {row.short_processes:6,}   {row.name[:160]}"
                      for row in rows[:top])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stack.census", description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=40, help="roles shown (40)")
    parser.add_argument("--short", type=int, default=0, metavar="N",
                        help=f"and the N command lines whose processes under {SHORT:g} s cost the most")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to count")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("a command to count, after --")
    with MachineCpu(period=LOOK_PERIOD) as looked, Processes() as ended:
        status = subprocess.call(command)
    print(f"\n----- {' '.join(command)}: every process that ended, by role (stack.census) -----")
    print(report(by_role(ended.exited, looked), args.top, ended.lost))
    if args.short:
        print(f"\n----- the command lines whose processes under {SHORT:g} s cost the most -----")
        print(short_commands(by_command(ended.exited, looked), args.short))
    return status


if __name__ == "__main__":
    sys.exit(main())
