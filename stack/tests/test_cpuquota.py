"""make test-slow's quota (stack.cpuquota) holds what runs under it to its share of
the cores, on this machine's kernel, and leaves nothing behind."""

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from stack.cpuquota import QuotaError, cpu_quota, hierarchy

# A cgroup of the kernel's, made as root: not what make check runs.
pytestmark = pytest.mark.system


def _group_of(pid: int) -> str:
    place = hierarchy()
    return str(place.home(pid).relative_to(place.root))


def test_two_spinners_under_a_quarter_of_two_cores_get_half_a_cores_time_and_the_group_goes():
    home = _group_of(os.getpid())
    with cpu_quota(0.25, cores=2, name="flashsale-quota-test") as group:
        spinners = [psutil.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
        try:
            began, before = time.monotonic(), [s.cpu_times() for s in spinners]
            time.sleep(1.0)
            used = sum(s.cpu_times().user + s.cpu_times().system - b.user - b.system
                       for s, b in zip(spinners, before, strict=True))
            took = time.monotonic() - began
            inside = {_group_of(s.pid) for s in spinners}
        finally:
            for spinner in spinners:
                spinner.kill()
                spinner.wait()
    # The quota: half a core's time a second, refilled every 0.1 s (a period's slack).
    # Unlimited, two spinners take close to two, or what a busy machine leaves them.
    assert used <= took * 0.5 + 0.05, (used, took)
    assert inside == {group.name}
    assert not group.exists() and _group_of(os.getpid()) == home


def test_a_share_outside_the_machine_is_refused_before_anything_is_made():
    with pytest.raises(QuotaError, match="at most 1"), cpu_quota(1.5, cores=2):
        pass
    with pytest.raises(QuotaError, match="above 0"), cpu_quota(0, cores=2):
        pass


def test_what_the_run_left_in_the_group_is_moved_home_before_it_goes():
    with cpu_quota(1.0, cores=2, name="flashsale-quota-test") as group:
        left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not group.exists() and _group_of(left.pid) == _group_of(os.getpid())
    finally:
        left.kill()
        left.wait()


def test_a_group_busy_with_a_process_on_its_way_out_is_removed_once_it_has_ended(monkeypatch):
    """The kernel refuses to remove a group while a process in it is still ending
    (EBUSY), though it no longer lists it: here the first two tries are refused."""
    removals = []
    rmdir = Path.rmdir

    def busy_twice(path: Path) -> None:
        removals.append(path)
        if len(removals) <= 2:
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))
        rmdir(path)

    home = _group_of(os.getpid())
    monkeypatch.setattr(Path, "rmdir", busy_twice)
    with cpu_quota(1.0, cores=2, name="flashsale-quota-test") as group:
        assert _group_of(os.getpid()) != home
    assert len(removals) == 3 and not group.exists() and _group_of(os.getpid()) == home
