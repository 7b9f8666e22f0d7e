"""Every process's CPU over one command, each counted whole as it ended: the kernel's
process accounting (acct(2)) writes a record for every process that ends, however
briefly it lived, with the CPU it used; a look every quarter second reads the command
lines (``stack.machinecpu``'s looks), so that each record gets its command's role. The
suite's own report looks every 2 s and calls what ended between two looks "not seen";
this says what it was.

    python -m stack.census [--top 40] -- make test-slow     (as root)

Process accounting is one file for the whole machine: a second census, or anything
else that turns it on meanwhile, takes the records from then on, and this one's end
turns it off. A census run by the command hands the accounting back when it ends
(``FLASHSALE_CENSUS_FILE``): the suite's test of this one, in a census of the suite.
A process still running when the command ends is not counted (the suite's stacks stop
every server they started). A process never seen by a look counts under its program's
name (the kernel keeps 15 characters of it), in brackets.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .machinecpu import MachineCpu
from .servers import StackError

# struct acct_v3 (linux/acct.h): flag, version, tty, exit code, uid, gid, pid, ppid,
# start (s since the epoch), elapsed (float), then eight comp_t (user and system time
# first), then the command's name.
RECORD = struct.Struct("<BBHIIIIIIf8H16s")
VERSION = 3
AHZ = 100  # the records' clock ticks a second
LOOK_PERIOD = 0.25
SHORT = 2.0  # seconds: what the suite's looks, 2 s apart, may miss
OUTER = "FLASHSALE_CENSUS_FILE"  # the accounting file of the census this process runs under
CLOCKS_APART = 0.02  # the most a record's start and a look's part, a second of life


class CensusError(StackError):
    """Process accounting cannot be turned on here (not root, no kernel support)."""


@dataclass(frozen=True)
class Exited:
    """One process as it ended."""

    pid: int
    ppid: int
    started: int  # seconds since the epoch
    alive: float  # seconds
    cpu: float  # seconds, user and system
    program: str  # the kernel's name for it: its executable's, cut to 15 characters


def comp_t(value: int) -> int:
    """A comp_t's value: 13 bits of mantissa, 3 of a base-8 exponent."""
    return (value & 0x1FFF) << (3 * (value >> 13))


def read(path: Path) -> list[Exited]:
    """The records of an accounting file, in the order the processes ended."""
    data = path.read_bytes()
    exited = []
    for offset in range(0, len(data) - RECORD.size + 1, RECORD.size):
        fields = RECORD.unpack_from(data, offset)
        if fields[1] & 0x0F != VERSION:
            raise CensusError(f"{path}: a record of version {fields[1] & 0x0F}, not {VERSION}")
        exited.append(Exited(pid=fields[6], ppid=fields[7], started=fields[8], alive=fields[9] / AHZ,
                             cpu=(comp_t(fields[10]) + comp_t(fields[11])) / AHZ,
                             program=fields[18].split(b"\0", 1)[0].decode(errors="replace")))
    return exited


@contextmanager
def accounting(path: Path) -> Iterator[Path]:
    """Process accounting on, into ``path``, for the block; then back to the file of
    the census this one runs under (``OUTER``, which the block's processes inherit
    naming this one), or off."""
    outer = os.environ.get(OUTER)
    path.touch()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.acct(os.fsencode(path)) != 0:
        raise CensusError(f"acct({path}): {os.strerror(ctypes.get_errno())} (root, and a kernel with "
                          "BSD process accounting, are needed)")
    os.environ[OUTER] = str(path)
    try:
        yield path
    finally:
        # Under a census (the suite's own tests of this, in a census of make test), the
        # accounting goes back to its file, not off for the rest of its command.
        if outer is None:
            os.environ.pop(OUTER, None)
        else:
            os.environ[OUTER] = outer
        libc.acct(os.fsencode(outer) if outer else None)


@dataclass
class Row:
    role: str
    seconds: float = 0.0
    processes: int = 0
    short_seconds: float = 0.0  # of those that lived under SHORT
    short_processes: int = 0


def by_role(exited: list[Exited], looked: MachineCpu) -> list[Row]:
    """The CPU of the processes that ended, by role, the most first."""
    pids: dict[int, list[tuple[float, str]]] = {}
    for (pid, started), seen in looked.seen.items():
        pids.setdefault(pid, []).append((started, seen.role))
    rows: dict[str, Row] = {}
    for process in exited:
        # The record's start is the wall clock at its end less its lifetime, and the
        # look's from the boot's: on a machine whose wall clock is steered they part by
        # seconds over a long life. The closest of the PID's starts within that.
        near = [(abs(started - process.started), role) for started, role in pids.get(process.pid, ())]
        near = [(apart, role) for apart, role in near if apart <= 2 + process.alive * CLOCKS_APART]
        role = min(near)[1] if near else f"[{process.program}]"
        row = rows.setdefault(role, Row(role))
        row.seconds += process.cpu
        row.processes += 1
        if process.alive < SHORT:
            row.short_seconds += process.cpu
            row.short_processes += 1
    return sorted(rows.values(), key=lambda row: -row.seconds)


def report(rows: list[Row], top: int) -> str:
    total = sum(row.seconds for row in rows)
    short = sum(row.short_seconds for row in rows)
    out = [f"{sum(row.processes for row in rows):,} processes ended, {total:,.0f} s of CPU; "
           f"{sum(row.short_processes for row in rows):,} of them lived under {SHORT:g} s: {short:,.0f} s",
           f"{'CPU s':>8} {'share':>7} {'processes':>9}   {f'under {SHORT:g} s':>15}   role"]
    out += [f"{row.seconds:8.1f} {100 * row.seconds / total if total else 0:5.0f} % {row.processes:9,}   "
            f"{row.short_seconds:7.1f} s {row.short_processes:6,}   {row.role}" for row in rows[:top]]
    if len(rows) > top:
        rest = rows[top:]
        out.append(f"{sum(row.seconds for row in rest):8.1f}        {sum(row.processes for row in rest):9,}"
                   f"                      {len(rest)} more roles")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stack.census", description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=40, help="roles shown (40)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to count")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("a command to count, after --")
    with tempfile.TemporaryDirectory(prefix="flashsale-census-") as scratch:
        file = Path(scratch) / "pacct"
        with MachineCpu(period=LOOK_PERIOD) as looked, accounting(file):
            status = subprocess.call(command)
        print(f"\n----- {' '.join(command)}: every process that ended, by role (stack.census) -----")
        print(report(by_role(read(file), looked), args.top))
    return status


if __name__ == "__main__":
    sys.exit(main())
