"""The census (stack.census) reads the kernel's exit records (stack.taskstats) and
counts each process whole, under its role, however briefly it lived."""

import struct
import subprocess
import sys

import pytest

from stack.census import LOOK_PERIOD, by_command, by_role, report, short_commands
from stack.machinecpu import MachineCpu, _Seen
from stack.taskstats import (
    COMM,
    CPU_RUN_VIRTUAL_TOTAL,
    ETIME,
    GENL_ID_CTRL,
    HEADER,
    NLMSG_ERROR,
    PID_PPID_BTIME,
    RECORD_SIZE,
    TGID,
    TYPE_AGGR_PID,
    TYPE_AGGR_TGID,
    TYPE_PID,
    TYPE_STATS,
    TYPE_TGID,
    Ended,
    Exited,
    Processes,
    TaskstatsError,
    _attribute,
    message,
    records,
)

FAMILY = 31


def _stats(*, pid=0, tgid=0, ppid=1, cpu_ns=0, etime_us=0, comm=b"") -> bytes:
    stats = bytearray(RECORD_SIZE + 28)  # a later version's fields after ac_tgid
    for (layout, offset), values in ((CPU_RUN_VIRTUAL_TOTAL, (cpu_ns,)), (COMM, (comm,)),
                                     (PID_PPID_BTIME, (pid, ppid, 1_700_000_000)), (ETIME, (etime_us,)),
                                     (TGID, (tgid,))):
        layout.pack_into(stats, offset, *values)
    return bytes(stats)


def _exit(kind: int, ident: int, stats: bytes) -> bytes:
    inner = _attribute(TYPE_PID if kind == TYPE_AGGR_PID else TYPE_TGID, struct.pack("=I", ident))
    return _attribute(kind, inner + _attribute(TYPE_STATS, stats))


def test_a_datagrams_records_read_as_the_tasks_they_describe():
    last_thread = _stats(pid=42, tgid=42, cpu_ns=70_000_000, etime_us=2_500_000, comm=b"nft")
    group = _stats(cpu_ns=2_400_000_000)  # the process's sum: no name or ids of its own
    data = message(FAMILY, 2, _exit(TYPE_AGGR_PID, 42, last_thread) + _exit(TYPE_AGGR_TGID, 42, group))
    other = message(FAMILY + 1, 2, _exit(TYPE_AGGR_PID, 43, last_thread))  # another family's: not read
    assert records(data + other, FAMILY) == [(TYPE_AGGR_PID, 42, last_thread), (TYPE_AGGR_TGID, 42, group)]
    refused = HEADER.pack(HEADER.size + 4, NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", -1)
    with pytest.raises(TaskstatsError, match="Operation not permitted"):
        records(refused, FAMILY)
    assert records(HEADER.pack(HEADER.size + 4, NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", 0), FAMILY) == []
    assert records(message(GENL_ID_CTRL, 1, b""), FAMILY) == []


def test_a_process_is_its_main_threads_record_with_every_threads_cpu():
    ended = Ended()
    ended.add(TYPE_AGGR_PID, 11, _stats(pid=11, tgid=10, cpu_ns=300_000_000, comm=b"worker"))  # a thread
    ended.add(TYPE_AGGR_PID, 10, _stats(pid=10, tgid=10, cpu_ns=100_000_000, etime_us=900_000,
                                        comm=b"python"))
    ended.add(TYPE_AGGR_PID, 20, _stats(pid=20, tgid=20, ppid=10, cpu_ns=5_000_000, comm=b"true"))
    ended.add(TYPE_AGGR_TGID, 10, _stats(cpu_ns=400_000_000))  # as its last thread ended
    ended.add(TYPE_AGGR_TGID, 99, _stats(cpu_ns=1))  # one whose main thread ended before the census
    assert ended.exited == [
        Exited(pid=10, ppid=1, started=1_700_000_000, alive=0.9, cpu=0.4, program="python"),
        Exited(pid=20, ppid=10, started=1_700_000_000, alive=0.0, cpu=0.005, program="true"),
    ]
    with pytest.raises(TaskstatsError, match="version 10 or later"):
        ended.add(TYPE_AGGR_PID, 30, _stats(pid=30, tgid=30)[:RECORD_SIZE - 4])


def test_a_record_takes_the_role_of_the_look_that_started_nearest_it():
    looked = MachineCpu()
    looked.seen = {(42, 1_000.3): _Seen("pytest", "python -m pytest", 0.0, 0.0),
                   (43, 1_000.0): _Seen("nginx", "nginx: worker", 0.0, 0.0),
                   (44, 990.0): _Seen("Redis", "redis-server", 0.0, 0.0),
                   (44, 1_000.2): _Seen("MariaDB", "mariadbd", 0.0, 0.0)}
    exited = [
        # A long life's record starts seconds from the look's (the wall clock steered).
        Exited(pid=42, ppid=1, started=1_006, alive=900.0, cpu=80.0, program="python"),
        # A brief one that far from it is another process with the same PID.
        Exited(pid=43, ppid=1, started=1_006, alive=0.5, cpu=0.1, program="nginx"),
        Exited(pid=44, ppid=1, started=1_000, alive=1.0, cpu=2.0, program="mariadbd"),
    ]
    rows = {row.name: row for row in by_role(exited, looked)}
    assert rows["pytest"].seconds == 80.0
    assert rows["[nginx]"].processes == 1 and "nginx" not in rows
    assert rows["MariaDB"].seconds == 2.0 and "Redis" not in rows  # the nearer of two starts
    assert report(list(rows.values()), top=5).startswith("3 processes ended")
    assert report(list(rows.values()), top=5, lost=2).startswith("records lost 2 times")
    # By command line: only the short lives, the costliest first (pytest lived long).
    lines = short_commands(by_command(exited, looked), top=5).splitlines()
    assert [line.split()[-1] for line in lines] == ["mariadbd", "[nginx]"]
    assert lines[0].split()[:3] == ["2.0", "s", "1"]


# Three threads spin to 0.4 s of the process's CPU, then it says what its own clock
# read (the scheduler's sum of its threads, as the record's). The record, taken as
# each thread exits, adds the interpreter's teardown and lacks what the scheduler
# had not yet added up of each of the four threads' last turn: a tick at most
# (CONFIG_HZ is 100 or more).
THREADS, TICK = 4, 0.01
SPIN = """import threading, time
time.sleep(0.6)
def spin():
    while time.process_time() < 0.4: pass
threads = [threading.Thread(target=spin) for _ in range(3)]
[t.start() for t in threads]
[t.join() for t in threads]
print(time.process_time())"""


@pytest.mark.system  # the exit records need root, as make test has
def test_a_command_is_counted_whole_under_its_role_and_an_unseen_one_by_its_name():
    with MachineCpu(period=LOOK_PERIOD) as looked, Processes() as ended:
        said = subprocess.run([sys.executable, "-c", SPIN], check=True, capture_output=True, text=True)
        subprocess.run(["true"], check=True)
    assert ended.lost == 0
    (spinner,) = [p for p in ended.exited if p.pid in {pid for (pid, _), seen in looked.seen.items()
                                                       if "time.sleep(0.6)" in seen.command}]
    own = float(said.stdout)
    # A tick's sample (acct(2)'s) is far off either way on a busy core.
    assert own - THREADS * TICK <= spinner.cpu <= own + 0.25 and spinner.alive >= 0.9, (own, spinner)
    rows = {row.name: row for row in by_role(ended.exited, looked)}
    assert rows["other Python"].seconds >= spinner.cpu
    assert any(role in ("[true]", "true") for role in rows)  # by its line if a look saw it
    assert "processes ended" in report(list(rows.values()), top=5)


@pytest.mark.system
def test_two_censuses_at_once_each_get_every_record():
    with Processes() as outer:
        with Processes() as inner:
            subprocess.run(["sleep", "0"], check=True)
        subprocess.run(["true"], check=True)  # after the inner census: the outer's alone
    assert {"sleep", "true"} <= {p.program for p in outer.exited}
    assert "sleep" in {p.program for p in inner.exited} and "true" not in {p.program for p in inner.exited}
