"""The census (stack.census) reads the kernel's accounting records and counts each
process whole, under its role, however briefly it lived."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stack.census import LOOK_PERIOD, OUTER, RECORD, Exited, accounting, by_role, comp_t, read, report
from stack.machinecpu import MachineCpu, _Seen


def _record(*, pid: int, cpu_ticks: int, program: bytes, version: int = 3) -> bytes:
    return RECORD.pack(0, version, 0, 0, 0, 0, pid, 1, 1_700_000_000, 250.0,
                       cpu_ticks, 0, 0, 0, 0, 0, 0, 0, program)


def test_a_comp_t_is_a_13_bit_mantissa_with_a_base_8_exponent():
    assert comp_t(5) == 5
    assert comp_t((2 << 13) | 3) == 3 * 64


def test_a_record_reads_as_the_process_it_describes(tmp_path):
    file = tmp_path / "pacct"
    file.write_bytes(_record(pid=42, cpu_ticks=(1 << 13) | 30, program=b"nft") +
                     _record(pid=43, cpu_ticks=7, program=b"python3.11"))
    first, second = read(file)
    assert first == Exited(pid=42, ppid=1, started=1_700_000_000, alive=2.5, cpu=2.4, program="nft")
    assert second.program == "python3.11" and second.cpu == pytest.approx(0.07)
    file.write_bytes(_record(pid=44, cpu_ticks=1, program=b"sh", version=2))
    with pytest.raises(Exception, match="version 2"):
        read(file)


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
    rows = {row.role: row for row in by_role(exited, looked)}
    assert rows["pytest"].seconds == 80.0
    assert rows["[nginx]"].processes == 1 and "nginx" not in rows
    assert rows["MariaDB"].seconds == 2.0 and "Redis" not in rows  # the nearer of two starts


@pytest.mark.system  # acct(2) needs root, as make test has
def test_a_command_is_counted_whole_under_its_role_and_an_unseen_one_by_its_name(tmp_path):
    spin = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    file = tmp_path / "pacct"
    with MachineCpu(period=LOOK_PERIOD) as looked, accounting(file):
        # A Python process the looks see (it spins a second of wall time at most), and
        # a short one they may not.
        subprocess.run([sys.executable, "-c", f"import time; time.sleep(0.6)\n{spin}"], check=True)
        subprocess.run(["true"], check=True)
    exited = read(file)
    (spinner,) = [p for p in exited if p.pid in {pid for (pid, _), seen in looked.seen.items()
                                                  if "time.sleep(0.6)" in seen.command}]
    assert spinner.cpu >= 0.35 and spinner.alive >= 0.9
    rows = {row.role: row for row in by_role(exited, looked)}
    assert rows["other Python"].seconds >= 0.35
    assert any(role in ("[true]", "true") for role in rows)  # by its line if a look saw it
    assert "processes ended" in report(list(rows.values()), top=5)
    assert Path(file).stat().st_size % RECORD.size == 0


@pytest.mark.system
def test_a_census_under_another_hands_the_accounting_back_when_it_ends(tmp_path):
    before = os.environ.get(OUTER)  # a census of the suite's, if this runs under one
    outer, inner = tmp_path / "outer", tmp_path / "inner"
    with accounting(outer):
        assert os.environ[OUTER] == str(outer)  # what the processes it starts inherit
        with accounting(inner):
            subprocess.run(["sleep", "0"], check=True)
        subprocess.run(["true"], check=True)  # after the inner census: the outer's
    assert os.environ.get(OUTER) == before
    assert "sleep" in {p.program for p in read(inner)}
    assert "true" in {p.program for p in read(outer)} and "true" not in {p.program for p in read(inner)}
