"""A machine made slower for ``make test-slow``: this process, and every process it
starts after, gets a share of the machine's cores through a CPU quota of the kernel's
(a cgroup of its own: v2's ``cpu.max``, or v1's ``cpu.cfs_quota_us``). At half, the
suite and its stacks get one core's time a second of two, whatever else runs: the
slower kind of machine, where CPU burners beside the suite take only what the kernel
gives them among its many processes.

Needs root, as ``make test`` does (apt). The group is removed at the end, what is left
in it moved back first.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .servers import StackError

CGROUPS = Path("/sys/fs/cgroup")
PERIOD_US = 100_000  # the kernel's default period: the quota is refilled every 0.1 s
REMOVAL_S = 10.0  # how long the group may stay busy with processes on their way out


class QuotaError(StackError):
    """No CPU quota can be set on this machine (no cpu controller, not root)."""


@dataclass(frozen=True)
class Hierarchy:
    """Where groups of the cpu controller are made, and how a quota is written."""

    root: Path
    version: int

    def limit(self, group: Path, quota_us: int) -> None:
        if self.version == 2:
            (group / "cpu.max").write_text(f"{quota_us} {PERIOD_US}\n")
        else:
            (group / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (group / "cpu.cfs_quota_us").write_text(f"{quota_us}\n")

    def home(self, pid: int) -> Path:
        """The group ``pid`` is in now, in this hierarchy."""
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            number, controllers, path = line.split(":", 2)
            ours = number == "0" if self.version == 2 else "cpu" in controllers.split(",")
            if ours:
                return self.root / path.lstrip("/")
        raise QuotaError(f"process {pid} is in no group of {self.root}")


def hierarchy(cgroups: Path = CGROUPS) -> Hierarchy:
    """The cpu controller's: v1's own mount (``cpu`` or ``cpu,cpuacct``), else v2's
    unified tree where its root offers ``cpu``."""
    for name in ("cpu", "cpu,cpuacct"):
        if (cgroups / name / "cpu.cfs_quota_us").exists():
            return Hierarchy(cgroups / name, 1)
    for root in (cgroups, cgroups / "unified"):
        controllers = root / "cgroup.controllers"
        if controllers.exists() and "cpu" in controllers.read_text().split():
            return Hierarchy(root, 2)
    raise QuotaError(f"no cgroup cpu controller under {cgroups}: a CPU quota needs one")


@contextmanager
def cpu_quota(share: float, *, cores: int | None = None, name: str = "flashsale-slow") -> Iterator[Path]:
    """This process and what it starts from now get ``share`` of the machine's
    ``cores`` (all of them unless said): yields the group."""
    cores = cores or os.cpu_count() or 1
    if not 0 < share <= 1:
        raise QuotaError(f"the share of the machine is above 0 and at most 1, not {share}")
    place = hierarchy()
    home = place.home(os.getpid())
    group = place.root / f"{name}-{os.getpid()}"
    try:
        group.mkdir()
        if place.version == 2:
            (place.root / "cgroup.subtree_control").write_text("+cpu\n")
        place.limit(group, round(share * cores * PERIOD_US))
        (group / "cgroup.procs").write_text(f"{os.getpid()}\n")
    except OSError as e:
        _remove(group, home)
        raise QuotaError(f"cannot set a CPU quota in {group} ({e.strerror}): it needs root") from e
    try:
        yield group
    finally:
        _remove(group, home)


def _remove(group: Path, home: Path, patience: float = REMOVAL_S) -> None:
    """Back home, with anything the run left in the group (their cgroup.procs takes
    one PID a write), then the group's gone. A process still on its way out (one
    that dies with the process that made it, as a test host's holder does) can be
    neither moved nor listed, and the group stays busy until it has ended: the
    removal is tried again until then."""
    if not group.exists():
        return
    deadline = time.monotonic() + patience
    while True:
        for pid in (group / "cgroup.procs").read_text().split():
            try:
                (home / "cgroup.procs").write_text(f"{pid}\n")
            except ProcessLookupError:
                pass  # ended since it was listed
        try:
            group.rmdir()
            return
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
        time.sleep(0.05)
