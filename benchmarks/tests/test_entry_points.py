"""Each command of the lab loads as its make target runs it: ``python -m <module>`` in a
process whose environment names no Django settings (the suite's own does, which hid a
benchmark that could no longer start)."""

import os
from concurrent.futures import ThreadPoolExecutor

from stack.config import ROOT
from tests.forked import python

PACKAGES = ("benchmarks", "loadtest")


def commands() -> list[str]:
    """Every module of the lab's packages that is a command (it has a ``main``)."""
    return sorted(f"{package}.{path.stem}" for package in PACKAGES for path in (ROOT / package).glob("*.py")
                  if "\ndef main(" in path.read_text())


def loads(module: str) -> str:
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    done = python(["-c", f"import {module}"], env=env)
    said = done.stderr.strip().splitlines() or [f"status {done.returncode}, nothing said"]
    return "" if done.returncode == 0 else f"{module}: {said[-1]}"


def test_every_command_of_the_lab_loads_without_settings_named():
    found = commands()
    assert "benchmarks.capacity" in found and "loadtest.compare" in found
    with ThreadPoolExecutor(4) as pool:
        failed = [error for error in pool.map(loads, found) if error]
    assert failed == []
