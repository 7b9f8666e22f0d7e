"""The whole machine's CPU over ``make test``, by what used it: the suite keeps both
cores busy, so its time is CPU, and the servers that idle beside the tests (each
stack's Prometheus and exporters, the writers' loops) cost it as the tests do, though
no test's figure shows them (``stack.testcpu`` counts what a test started).

Every process is looked at every ``period`` seconds (``/proc`` through psutil): one
seen first after the look began counts all its CPU, one there before counts from the
first look. What ran between two looks and ended (a short command, a kernel thread's
work) is not seen by any; the machine's busy time (``/proc/stat``) says how much,
less what it spent in no process: the kernel's interrupts (the network's packets, on
loopback too, and the disks') and the time the hypervisor gave this machine's cores
to another (steal), each its own line.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

import psutil

# First match wins: a process's command line, as ``ps`` shows it, against each pattern.
ROLES: tuple[tuple[str, str], ...] = (
    ("CPU burners", r"-c while True: pass$"),
    ("pytest", r"-m pytest\b"),
    ("the app instances", r"\b(gunicorn|granian)\b"),
    ("persisters", r"manage\.py persist_orders\b"),
    ("expirers", r"manage\.py expire_orders\b"),
    ("race runners", r"manage\.py run_races\b"),
    ("other manage.py commands", r"manage\.py\b"),
    ("MariaDB", r"\bmariadbd\b"),
    ("Redis", r"\bredis-server\b"),
    ("ZooKeeper", r"zookeeper"),
    ("Prometheus", r"/prometheus\b(?!-)"),
    ("exporters", r"exporter\b"),
    ("Alertmanager", r"\balertmanager\b"),
    ("nginx", r"^nginx:"),
    ("Chromium and Playwright", r"chromium|playwright"),
    ("the type checker and the docs build", r"/mypy \.$|-m (stack docs|mkdocs build)\b"),
    ("load and fuzz clients", r"\b(locust|wrk|schemathesis)\b"),
    ("supervisord", r"\bsupervisord\b"),
    ("other Python", r"\bpython"),
)
UNSEEN = "not seen (ended between two looks)"
INTERRUPTS = "the kernel's interrupts (network, disks)"
STOLEN = "stolen by the hypervisor (steal)"
COMMAND_KEPT = 200  # of a command line, the characters kept to tell it from others


def role_of(command: str, roles: tuple[tuple[str, str], ...] = ROLES) -> str:
    """The first role whose pattern ``command`` matches, else its program's name."""
    for role, pattern in roles:
        if re.search(pattern, command):
            return role
    program = command.split(" ", 1)[0].rsplit("/", 1)[-1]
    return program or "?"


def busy_seconds() -> float:
    """The machine's CPU seconds, every core's, spent on anything but idling."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def in_no_process() -> dict[str, float]:
    """Of the machine's CPU seconds so far, what no process's times hold."""
    times = psutil.cpu_times()
    return {INTERRUPTS: getattr(times, "irq", 0.0) + getattr(times, "softirq", 0.0),
            STOLEN: getattr(times, "steal", 0.0)}


@dataclass
class _Seen:
    role: str
    command: str
    first: float  # its CPU seconds when first seen (0 for one born since the look began)
    last: float


@dataclass
class CommandCpu:
    """The CPU of the processes that ran one command line."""

    command: str
    role: str
    seconds: float = 0.0
    processes: int = 0


class MachineCpu:
    """Looks at every process every ``period`` seconds, from entering the context to
    leaving it; then ``by_role`` and ``report``."""

    def __init__(self, period: float = 2.0, roles: tuple[tuple[str, str], ...] = ROLES):
        self.period, self.roles = period, roles
        self.seen: dict[tuple[int, float], _Seen] = {}
        self.busy = self.wall = 0.0
        self.outside: dict[str, float] = {}  # in no process, over the looks (in_no_process)
        self._stop = threading.Event()
        self._began = time.time()
        self._busy_before, self._outside_before = busy_seconds(), in_no_process()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._looking = threading.Lock()  # the thread's looks and a caller's own

    def look(self) -> None:
        """One look at every process. A process's command line is read at every look:
        one seen between its fork and its exec still ran its parent's, and is taken
        for what it runs at its last look."""
        with self._looking:
            for process in psutil.process_iter(["pid", "create_time", "cpu_times", "cmdline", "name"]):
                info = process.info
                if info["cpu_times"] is None or info["create_time"] is None:
                    continue  # gone, or not ours to read
                key = (info["pid"], info["create_time"])
                cpu = info["cpu_times"].user + info["cpu_times"].system
                command = " ".join(info["cmdline"] or ()) or info["name"] or ""
                kept = command[:COMMAND_KEPT]
                seen = self.seen.get(key)
                if seen is None:
                    first = 0.0 if info["create_time"] >= self._began else cpu  # born since the look began
                    self.seen[key] = _Seen(role_of(command, self.roles), kept, first, cpu)
                    continue
                seen.last = cpu
                # It exec'd since (a zombie's command line is empty: it keeps its own).
                if info["cmdline"] and kept != seen.command:
                    seen.command, seen.role = kept, role_of(command, self.roles)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.look()

    def __enter__(self) -> MachineCpu:
        self._began, self._busy_before, self._outside_before = time.time(), busy_seconds(), in_no_process()
        self.look()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.look()
        self.busy = busy_seconds() - self._busy_before
        self.outside = {name: now - self._outside_before[name] for name, now in in_no_process().items()}
        self.wall = time.time() - self._began

    def by_role(self) -> dict[str, float]:
        """CPU seconds by role, most first; then what no process holds (``INTERRUPTS``,
        ``STOLEN``) and what no look saw (``UNSEEN``)."""
        used: dict[str, float] = {}
        for process in self.seen.values():
            used[process.role] = used.get(process.role, 0.0) + process.last - process.first
        seen = sum(used.values())
        used |= self.outside
        used[UNSEEN] = max(self.busy - seen - sum(self.outside.values()), 0.0)
        return dict(sorted(used.items(), key=lambda item: item[1], reverse=True))

    def by_command(self, top: int = 40) -> list[CommandCpu]:
        """The ``top`` command lines by CPU seconds: what a role such as "other
        Python" is made of."""
        used: dict[str, CommandCpu] = {}
        for process in self.seen.values():
            row = used.setdefault(process.command, CommandCpu(process.command, process.role))
            row.seconds += process.last - process.first
            row.processes += 1
        return sorted(used.values(), key=lambda row: row.seconds, reverse=True)[:top]

    def report(self, top: int = 15) -> list[str]:
        used = self.by_role()
        total, cores = sum(used.values()), psutil.cpu_count() or 1
        lines = [f"  {total:7.0f} s of CPU in {self.wall:.0f} s ({cores} cores, "
                 f"{100 * self.busy / max(self.wall * cores, 1e-9):.0f} % busy)"]
        lines += [f"  {seconds:7.0f} s  {100 * seconds / max(total, 1e-9):3.0f} %  {role}"
                  for role, seconds in list(used.items())[:top]]
        return lines
