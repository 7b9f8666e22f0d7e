"""``make check``: what needs no server, no root and no apt, its parts at once on the
machine's cores. ruff first (seconds, and the cheapest to fail), then together: mypy
and the docs build, then the alert rules' ``promtool`` and ``amtool`` checks where
those programs are installed; and the tests that start nothing, in two halves of
equal time by ``.test_durations`` (pytest-split, as ``make test``'s lanes split
theirs). Each part's output is printed when it ends, then each part's time."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
# The tests that start nothing; a test that needs a server or a Debian program says so
# with a mark (conftest.py), and runs in make test alone.
NOTHING_STARTED = "not server and not system"
HALVES = 2
LINT = [str(BIN / "ruff"), "check", "."]
# The type checker, then the docs build: make check runs them beside its tests, make
# test beside its suite (``python -m stack test --checks``).
TYPES_AND_DOCS = [[str(BIN / "mypy"), "."], [sys.executable, "-m", "stack", "docs"]]


def _printed(text: str) -> None:
    print(text, flush=True)


@dataclass
class Part:
    """Commands run one after another, their output kept for the end."""

    name: str
    commands: list[list[str]]
    status: int | None = None
    seconds: float = 0.0
    output: list[str] = field(default_factory=list)
    say: Callable[[str], None] = _printed  # how its output comes out, whole, when it ends

    def run(self) -> None:
        began = time.monotonic()
        for command in self.commands:
            done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
            self.output.append(f"$ {' '.join(command)}\n{done.stdout}")
            self.status = done.returncode
            if done.returncode not in (0, NONE_SELECTED):
                break
        self.seconds = time.monotonic() - began
        said = "".join(self.output)
        self.say(f"----- {self.name}: {self.seconds:.0f} s, {self.verdict} -----\n{said}")

    @property
    def verdict(self) -> str:
        return _verdict(self.status)

    @property
    def failed(self) -> bool:
        return self.status not in (0, NONE_SELECTED)


def parts(pytest_args: list[str], *, alerts: bool) -> list[Part]:
    """What runs at once: the type checker, the docs and (``alerts``) the alert checks
    in a row beside the halves of the tests."""
    rows = [*TYPES_AND_DOCS]
    if alerts:
        rows.append([*PYTEST, "-m", "system and not server and not e2e", "tests/test_alerts.py"])
    tests = [*PYTEST, "-m", NOTHING_STARTED, "--splits", str(HALVES),
             "--splitting-algorithm", "least_duration", *pytest_args]
    halves = [Part(f"tests {n}/{HALVES}", [[*tests, "--group", str(n)]]) for n in range(1, HALVES + 1)]
    return [Part("types, docs, alerts", rows), *halves]


def keep_bytecode() -> None:
    """Let the Python processes this run starts write their bytecode, whatever the
    environment says (``PYTHONDONTWRITEBYTECODE``, which some CI images set): else
    each of them compiles the project's modules again, and each pytest rewrites every
    test module's asserts again, half of what a collection costs. It goes where Python
    puts it by default, ``__pycache__`` beside each module, which git ignores."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False


def warm_bytecode(cwd: Path = ROOT) -> float:
    """Compile the tests of the project at ``cwd``, with pytest's rewrite of their
    asserts, and what they import, in one process; return its seconds. The suite runs
    it before its stacks and parts start at once: a process that finds no bytecode
    compiles all it imports for itself, and a fresh clone has none (uv installs the
    packages uncompiled). Its status is not read: a collection error fails the parts
    that meet it, with their output."""
    began = time.monotonic()
    writing = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([*PYTEST, "--collect-only"], cwd=cwd, env=writing, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - began


def main(pytest_args: list[str]) -> int:
    began = time.monotonic()
    keep_bytecode()
    lint = Part("ruff", [LINT])
    lint.run()
    if lint.status:
        return lint.status
    alerts = bool(shutil.which("promtool") and shutil.which("amtool"))
    if not alerts:
        print("make check: no promtool or amtool here, so the alert rules are checked by make test alone")
    running = parts(pytest_args, alerts=alerts)
    threads = [threading.Thread(target=part.run) for part in running]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"----- make check: {time.monotonic() - began:.0f} s -----")
    for part in [lint, *running]:
        print(f"  {part.name:<20} {part.seconds:5.0f} s  {part.verdict}")
    failed = [part.status for part in running if part.failed]
    if failed:
        return failed[0] or 1
    # PYTEST_ARGS may leave one half, or both, nothing to run.
    return NONE_SELECTED if all(part.status == NONE_SELECTED for part in running[1:]) else 0


NONE_SELECTED = 5  # pytest's exit status when no test is selected


def _verdict(status: int | None) -> str:
    return {0: "passed", NONE_SELECTED: "none selected"}.get(status or 0, f"failed ({status})")
