"""The kernel's record of each process as it ends, over generic netlink (taskstats,
Documentation/accounting/taskstats.rst): a listener registered for every CPU gets
one record a task as it exits, and one more for the whole process when its last
thread does, with the CPU time the scheduler gave it, to the nanosecond.

That figure (``cpu_run_virtual_total``, the scheduler's own sum, to which ``/proc``
scales its user and system times) is why this reads taskstats, not BSD process
accounting (acct(2)): acct's user and system times are the scheduler tick's sample,
each tick charging whichever task is on the core, and on a busy core the sample is
far off: a short process beside busy ones is charged a fraction of what it used, the
busy ones the rest (the tests page has the figures).

pyroute2 has a TaskStats module, whose own docs say not to use it ("not implemented
normally yet"): so the few messages this needs are packed here. Every listener gets
every record, so two at once take nothing from each other. It needs root
(CAP_NET_ADMIN) and the initial PID namespace.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from .servers import StackError

NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID, CTRL_ATTR_FAMILY_NAME = 1, 2
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
TASKSTATS_CMD_GET = 1
TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK = 3, 4
TYPE_PID, TYPE_TGID, TYPE_STATS, TYPE_AGGR_PID, TYPE_AGGR_TGID = 1, 2, 3, 4, 5

HEADER = struct.Struct("=IHHII")  # struct nlmsghdr: length, type, flags, sequence, port
GENL = struct.Struct("=BBH")  # struct genlmsghdr: command, version, reserved
ATTRIBUTE = struct.Struct("=HH")  # struct nlattr: length, type
# struct taskstats (linux/taskstats.h), the fields read, at their offsets.
CPU_RUN_VIRTUAL_TOTAL = struct.Struct("=Q"), 72  # ns
COMM = struct.Struct("=32s"), 80
PID_PPID_BTIME = struct.Struct("=III"), 128  # ac_pid, ac_ppid, ac_btime (s since the epoch)
ETIME = struct.Struct("=Q"), 144  # µs
TGID = struct.Struct("=I"), 368  # ac_tgid, since version 10
RECORD_SIZE = 372  # the fields above, through ac_tgid
RECEIVE_BUFFER = 32 << 20  # records waiting to be read, while the machine is at its busiest
SO_RCVBUFFORCE = 33  # SO_RCVBUF past net.core.rmem_max, as root (asm-generic/socket.h)


class TaskstatsError(StackError):
    """No exit records here (not root, no taskstats in the kernel), or one this cannot read."""


@dataclass(frozen=True)
class Exited:
    """One process as it ended."""

    pid: int
    ppid: int
    started: int  # seconds since the epoch
    alive: float  # seconds
    cpu: float  # seconds the scheduler ran its threads
    program: str  # the kernel's name for it: its executable's, cut to 15 characters


@dataclass(frozen=True)
class _Task:
    tgid: int
    exited: Exited


def _attribute(kind: int, payload: bytes) -> bytes:
    length = ATTRIBUTE.size + len(payload)
    return ATTRIBUTE.pack(length, kind) + payload + b"\0" * (-length % 4)


def _attributes(data: bytes) -> list[tuple[int, bytes]]:
    found, at = [], 0
    while at + ATTRIBUTE.size <= len(data):
        length, kind = ATTRIBUTE.unpack_from(data, at)
        if length < ATTRIBUTE.size:
            break
        found.append((kind & 0x3FFF, data[at + ATTRIBUTE.size:at + length]))  # less the nested/order flags
        at += (length + 3) & ~3
    return found


def message(family: int, command: int, attributes: bytes, *, flags: int = NLM_F_REQUEST,
            sequence: int = 1) -> bytes:
    body = GENL.pack(command, 1, 0) + attributes
    return HEADER.pack(HEADER.size + len(body), family, flags, sequence, 0) + body


def _field(stats: bytes, field: tuple[struct.Struct, int]) -> tuple:
    layout, offset = field
    return layout.unpack_from(stats, offset)


def task(stats: bytes) -> _Task:
    """One task's record (``struct taskstats``)."""
    if len(stats) < RECORD_SIZE:
        raise TaskstatsError(f"a taskstats record of {len(stats)} bytes, version "
                             f"{struct.unpack_from('=H', stats)[0]}: one of version 10 or later has ac_tgid")
    pid, ppid, started = _field(stats, PID_PPID_BTIME)
    (program,) = _field(stats, COMM)
    exited = Exited(pid=pid, ppid=ppid, started=started, alive=_field(stats, ETIME)[0] / 1e6,
                    cpu=_field(stats, CPU_RUN_VIRTUAL_TOTAL)[0] / 1e9,
                    program=program.split(b"\0", 1)[0].decode(errors="replace"))
    return _Task(tgid=_field(stats, TGID)[0], exited=exited)


def records(data: bytes, family: int) -> list[tuple[int, int, bytes]]:
    """A datagram's exit records: (``TYPE_AGGR_PID`` and the task's id, or
    ``TYPE_AGGR_TGID`` and the process's, then its ``struct taskstats``), in the order
    the kernel put them. An error's message raises it (a registration refused)."""
    found, at = [], 0
    while at + HEADER.size <= len(data):
        length, kind, _, _, _ = HEADER.unpack_from(data, at)
        if length < HEADER.size:
            break
        body = data[at + HEADER.size:at + length]
        if kind == NLMSG_ERROR:
            (code,) = struct.unpack_from("=i", body)
            if code:
                raise TaskstatsError(f"taskstats: {os.strerror(-code)}")
        elif kind == family:
            for aggregate, payload in _attributes(body[GENL.size:]):
                inner = dict(_attributes(payload))
                ident, stats = inner.get(TYPE_PID) or inner.get(TYPE_TGID), inner.get(TYPE_STATS)
                if aggregate in (TYPE_AGGR_PID, TYPE_AGGR_TGID) and ident and stats:
                    found.append((aggregate, struct.unpack_from("=I", ident)[0], stats))
        at += (length + 3) & ~3
    return found


class Ended:
    """Exit records joined into processes, in the order the kernel sent them: a
    process's CPU is its threads' (the record the kernel sends for the whole process
    as its last thread ends), its start, lifetime and name its main thread's."""

    def __init__(self) -> None:
        self._tasks: list[_Task] = []
        self._groups: dict[int, int] = {}  # tgid -> the index of its main thread's record

    def add(self, aggregate: int, ident: int, stats: bytes) -> None:
        """One record: ``records``' (aggregate, id, stats)."""
        if aggregate == TYPE_AGGR_TGID:  # the whole process, as its last thread ended
            index = self._groups.pop(ident, None)
            if index is not None:  # its main thread's record came first (or in the same message)
                kept = self._tasks[index]
                cpu = _field(stats, CPU_RUN_VIRTUAL_TOTAL)[0] / 1e9
                self._tasks[index] = replace(kept, exited=replace(kept.exited, cpu=cpu))
            return
        record = task(stats)
        if record.exited.pid == record.tgid:  # a main thread: the process's record, its own CPU so far
            self._groups[record.tgid] = len(self._tasks)
            self._tasks.append(record)

    @property
    def exited(self) -> list[Exited]:
        """Every process that ended, in the order they did."""
        return [kept.exited for kept in self._tasks]


class Processes(Ended):
    """The processes that end from entering the context to leaving it (``Ended``),
    from a listener on every CPU. ``lost`` counts the times its socket had no room."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = 0
        self._stop = threading.Event()
        self._acknowledged = threading.Event()
        self._failed: TaskstatsError | None = None
        self._socket = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
        self._thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> Processes:
        try:
            self._open()
        except BaseException:
            self._socket.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()  # the records of what ended are queued before its parent hears of it
        self._thread.join()
        try:
            self._socket.send(message(self._family, TASKSTATS_CMD_GET,
                                      _attribute(TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK, self._cpus)))
        finally:
            self._socket.close()
        if self._failed is not None and exc[0] is None:  # else the block's own error says more
            raise self._failed

    def _open(self) -> None:
        sock = self._socket
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER)
        except PermissionError:
            raise TaskstatsError("taskstats' exit records need root") from None
        sock.bind((0, 0))
        named = _attribute(CTRL_ATTR_FAMILY_NAME, b"TASKSTATS\0")
        sock.send(message(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, named))
        reply = sock.recv(1 << 16)
        length, kind, _, _, _ = HEADER.unpack_from(reply)
        if kind == NLMSG_ERROR:
            raise TaskstatsError("no taskstats in this kernel (CONFIG_TASKSTATS)")
        family = dict(_attributes(reply[HEADER.size + GENL.size:length])).get(CTRL_ATTR_FAMILY_ID)
        if family is None:
            raise TaskstatsError("the taskstats family has no id")
        self._family = struct.unpack_from("=H", family)[0]
        self._cpus = Path("/sys/devices/system/cpu/possible").read_text().strip().encode() + b"\0"
        sock.settimeout(0.2)
        self._thread.start()
        sock.send(message(self._family, TASKSTATS_CMD_GET,
                          _attribute(TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, self._cpus),
                          flags=NLM_F_REQUEST | NLM_F_ACK))
        if not self._acknowledged.wait(5):
            self._stop.set()
            raise TaskstatsError("taskstats did not answer the registration")
        if self._failed is not None:
            self._stop.set()
            raise self._failed

    def _read(self) -> None:
        drained_by = None  # once stopped: what is queued then, read within a second
        while drained_by is None or time.monotonic() < drained_by:
            try:
                data = self._socket.recv(1 << 16)
            except TimeoutError:
                if drained_by is not None:
                    return  # nothing left
                if self._stop.is_set():
                    drained_by = time.monotonic() + 1.0
                continue
            except OSError as e:
                if e.errno != errno.ENOBUFS:
                    raise
                self.lost += 1
                continue
            if drained_by is None and self._stop.is_set():
                drained_by = time.monotonic() + 1.0
            try:
                for aggregate, ident, stats in records(data, self._family):
                    self.add(aggregate, ident, stats)
            except TaskstatsError as e:  # a registration refused, a record this cannot read
                self._failed = e
            if HEADER.unpack_from(data)[1] == NLMSG_ERROR:
                self._acknowledged.set()
