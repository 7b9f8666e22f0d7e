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
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from stack.config import StackConfig

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "docs" / "results" / "measured"


# The stack's settings that move a measured figure. A measured file records them
# under its provenance line, and the docs build flags (and in strict mode refuses) a
# file whose record is not today's defaults (``stack.mkdocs_hooks``).
FIGURE_SETTINGS = ("strategy", "instances", "server", "workers", "threads", "persisters", "section_delay_ms",
                   "fast_path", "gate_pipeline", "gate_replicas", "redis_gate_appendfsync",
                   "redis_appendfsync", "metrics", "buyer_auth", "zk_nodes", "payment_grace_s",
                   "sign_up_challenge_bits", "payprovider_workers")
SETTINGS_LINE = "Under the stack's settings: "
# The line ``provenance`` writes, read back (the docs' results index, ``make results``).
PROVENANCE = re.compile(r"^Measured by `(?P<command>[^`]+)` at commit `(?P<commit>[0-9a-f]+)[^`]*` "
                        r"on (?P<date>[\d-]+)", re.MULTILINE)
_SETTING = re.compile(r"`(\w+)=([^`]*)`")


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


def figure_settings(config: StackConfig | None = None) -> dict[str, str]:
    """``FIGURE_SETTINGS`` of ``config`` (default: the stack this process's environment
    describes, which is the one a benchmark drives)."""
    config = config or StackConfig.from_env()
    return {name: _shown(getattr(config, name)) for name in FIGURE_SETTINGS}


def settings_recorded(text: str) -> dict[str, str] | None:
    """The settings a measured file's text records (None: it records none)."""
    for line in text.splitlines()[:3]:
        if line.startswith(SETTINGS_LINE):
            return dict(_SETTING.findall(line))
    return None


def settings_not_default(text: str) -> dict[str, tuple[str, str]] | None:
    """Of the settings a measured file records, those that are not today's defaults:
    name -> (recorded, today's). None: it records none. A setting it does not record
    (one added to ``FIGURE_SETTINGS`` after it was written) is not among them, since what
    it was is not known: ``settings_unrecorded`` names those."""
    recorded = settings_recorded(text)
    if recorded is None:
        return None
    today = figure_settings(StackConfig.from_env({}))
    return {name: (recorded[name], value) for name, value in today.items()
            if name in recorded and recorded[name] != value}


def settings_unrecorded(text: str) -> list[str]:
    """The settings of ``FIGURE_SETTINGS`` a measured file that records some does not."""
    recorded = settings_recorded(text)
    return [] if recorded is None else [name for name in FIGURE_SETTINGS if name not in recorded]


# What no measuring command runs: the pages, among them what the measuring commands
# write, and the tests (no command imports them). A change there changes nothing a
# command measures, so a measured file names the last commit that changed anything
# else, the code's: the files written before and after a commit of pages (a part of
# ``make results``'s output, a page reworded) or of a test name the same.
PROSE = ("docs", "README.md", "CHANGELOG.md", "CONTRIBUTING.md")
TESTS = ("**/tests/**", "**/conftest.py")
OUTSIDE_PROSE = (".", *(f":(exclude){path}" for path in PROSE), *(f":(exclude,glob){path}" for path in TESTS))


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def uncommitted() -> str:
    """``git status`` of the tracked files changed outside ``PROSE`` ("" for none)."""
    return _git("status", "--porcelain", "--untracked-files=no", "--", *OUTSIDE_PROSE)


def code_commit() -> str:
    """The last commit on HEAD that changed anything outside ``PROSE``, abbreviated ("":
    no git)."""
    full = _git("log", "-1", "--format=%H", "--", *OUTSIDE_PROSE)
    return _git("rev-parse", "--short", full) if full else ""


def provenance(command: str) -> str:
    """The lines that head a measured file: what ran, at which commit of the code
    (``code_commit``), where, when; and under which of the settings that move its figures."""
    commit = code_commit() or "unknown"
    if uncommitted():
        commit += " with uncommitted changes"
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    settings = " ".join(f"`{name}={value}`" for name, value in figure_settings().items())
    return (f"Measured by `{command}` at commit `{commit}` on {today}, on {os.cpu_count()} cores "
            f"({platform.machine()}, {platform.system()} {platform.release()}).\n{SETTINGS_LINE}{settings}.")


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
