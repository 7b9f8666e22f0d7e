"""Where a benchmark writes what it measured for the documentation to include.

With ``--docs``, a benchmark writes the report it prints into
``docs/results/measured/<name>.md``, headed by the command, the commit and the
machine it ran on; the docs' pages include that file (``--8<--``), so a figure on
them is the output of a named command at a named commit, never one pasted by hand.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "docs" / "results" / "measured"


def provenance(command: str) -> str:
    """The line that heads a measured file: what ran, at which commit, where, when."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += " with uncommitted changes"
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    return (f"Measured by `{command}` at commit `{commit}` on {today}, on {os.cpu_count()} cores "
            f"({platform.machine()}, {platform.system()} {platform.release()}).")


class _Tee(io.TextIOBase):
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


@contextlib.contextmanager
def recorded(name: str, command: str, *, write: bool) -> Iterator[None]:
    """Print as usual; with ``write``, what was printed also becomes
    ``docs/results/measured/<name>.md``, under its provenance line."""
    if not write:
        yield
        return
    buffer = io.StringIO()
    with contextlib.redirect_stdout(_Tee(sys.stdout, buffer)):
        yield
    measured_write(name, command, buffer.getvalue())


def measured_write(name: str, command: str, text: str) -> Path:
    """``text`` as ``docs/results/measured/<name>.md``, under its provenance line."""
    MEASURED.mkdir(parents=True, exist_ok=True)
    path = MEASURED / f"{name}.md"
    path.write_text(provenance(command) + "\n\n" + text.strip() + "\n")
    print(f"written for the docs: {path}")
    return path


def charts_copied(directory: Path, prefix: str) -> list[Path]:
    """Copy a report's charts (``<directory>/*.svg``) beside the measured tables, as
    ``<prefix>-<chart>.svg``, so a page shows the chart of the run its table came from."""
    MEASURED.mkdir(parents=True, exist_ok=True)
    copied = []
    for chart in sorted(directory.glob("*.svg")):
        target = MEASURED / f"{prefix}-{chart.stem.replace('_', '-')}.svg"
        shutil.copyfile(chart, target)
        copied.append(target)
    return copied
