"""What ``make test`` prints at its end (``stack.suite``): each part's time, the
slowest tests, the tests that cost the most CPU and the machine's CPU by what used
it, each also written as JSON into the run's suite directory."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Protocol

from . import check
from .config import StackConfig
from .machinecpu import MachineCpu

SLOWEST = 20


class Part(Protocol):
    """What the report reads of a part of the suite (``stack.suite.Part``)."""

    name: str
    config: StackConfig
    seconds: float
    durations: dict[str, float]  # test: s
    cpu: dict[str, list[float]]  # test: [its pytest's, its stack's] s

    @property
    def verdict(self) -> str: ...


def report(parts: Sequence[Part], seconds: float, out: Path, machine: MachineCpu | None = None,
           checks: check.Part | None = None, loops: tuple[float, float] | None = None) -> str:
    """``loops``: the yardstick (``stack.yardstick``) before the suite and after it."""
    lanes = len({part.config.run_dir for part in parts if part.name != "alone"})
    yardstick = f"; the yardstick {loops[0]:.2f} s before, {loops[1]:.2f} s after" if loops else ""
    lines = [f"----- the suite: {seconds:.0f} s in {lanes} lane{'s' if lanes > 1 else ''}{yardstick} -----"]
    shown: list[Part | check.Part] = [*parts, *([checks] if checks else [])]
    lines += [f"  {part.name:<12} {part.seconds:7.0f} s  {part.verdict}"
              + (f", {len(ran)} tests" if (ran := getattr(part, "durations", None)) else "")
              for part in shown]
    durations = {test: s for part in parts for test, s in part.durations.items()}
    (out / "durations.json").write_text(json.dumps(durations, indent=1, sort_keys=True) + "\n")
    lines.append(f"----- the {SLOWEST} slowest tests (setup, call and teardown) -----")
    slowest = sorted(durations.items(), key=lambda item: item[1], reverse=True)[:SLOWEST]
    lines += [f"  {s:7.1f} s  {test}" for test, s in slowest]
    cpu = {test: seconds for part in parts for test, seconds in part.cpu.items()}
    (out / "cpu.json").write_text(json.dumps(cpu, indent=1, sort_keys=True) + "\n")
    lines.append(f"----- the {SLOWEST} tests that cost the most CPU (its pytest and what that started; "
                 "its stack's processes, for a test that drives them) -----")
    costliest = sorted(cpu.items(), key=lambda item: sum(item[1]), reverse=True)[:SLOWEST]
    lines += [f"  {own + stack:7.1f} s  ({own:.1f} + {stack:.1f})  {test}"
              for test, (own, stack) in costliest]
    if machine is not None:
        (out / "machine-cpu.json").write_text(json.dumps(machine.by_role(), indent=1) + "\n")
        (out / "machine-cpu-commands.json").write_text(
            json.dumps([asdict(row) for row in machine.by_command()], indent=1) + "\n")
        lines.append("----- the machine's CPU over the suite, by what used it (every process, looked at "
                     f"every {machine.period:g} s: stack.machinecpu) -----")
        lines += machine.report()
    return "\n".join(lines)
