"""``make results``: every measured figure of the docs measured again, at one commit.

Each file under ``docs/results/measured/`` (and the README's demo table) names the
command that wrote it on its first line. This runs each of those commands once, in
turn, against the running stack, on a clean tree: the files they write then all name
the same commit, which no hand picked. That commit is the code's (``loadtest.measured.
code_commit``: the last that changed anything but the pages and the tests), so what a
command writes does not mark the next one's commit as modified, and a run too long for
one sitting goes on later (``--from N``) after its first part's files were committed.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.measured import MEASURED, PROSE, PROVENANCE, TESTS, code_commit, uncommitted

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


@dataclass
class Measurement:
    """One command, and the files whose first line names it."""

    command: str
    files: list[str] = field(default_factory=list)


def measurements() -> list[Measurement]:
    """Every command that wrote a measured file or the README's demo table, once each,
    in the order of the first file that names it (the README last)."""
    found: dict[str, Measurement] = {}
    sources = [*sorted(MEASURED.glob("*.md")), README]
    for path in sources:
        text = path.read_text()
        named = PROVENANCE.search(text if path == README else text.splitlines()[0])
        if named is None:
            continue
        found.setdefault(named["command"], Measurement(named["command"])).files.append(
            str(path.relative_to(ROOT)))
    return list(found.values())


def written_at(commit: str) -> list[str]:
    """The measured files (and the README) that do not name ``commit``."""
    behind = []
    for measurement in measurements():
        for name in measurement.files:
            named = PROVENANCE.search((ROOT / name).read_text())
            said = named["commit"] if named else ""
            if not (commit and said and (commit.startswith(said) or said.startswith(commit))):
                behind.append(name)
    return behind


def main(*, list_only: bool = False, only: str = "", start: int = 1, check: bool = False) -> int:
    """Run the commands (those containing ``only``; from the ``start``-th on), or with
    ``list_only`` name them, or with ``check`` say which files the code's commit did not write."""
    everything = measurements()
    chosen = [(n, m) for n, m in enumerate(everything, 1) if only in m.command and n >= start]
    if list_only:
        for n, m in chosen:
            print(f"{n}. {m.command}\n    writes {', '.join(m.files)}")
        return 0
    if check:
        commit = code_commit()
        behind = written_at(commit)
        print(f"[results] not written at {commit}: {', '.join(behind)}" if behind
              else f"[results] every measured file names {commit}")
        return 1 if behind else 0
    changed = uncommitted()
    if changed:
        print("[results] refused: the tree has uncommitted changes (outside the pages, "
              f"{', '.join(PROSE)}, and the tests, {', '.join(TESTS)}), so no commit would name "
              f"what was measured:\n{changed}",
              file=sys.stderr)
        return 2
    head, started, failed = code_commit(), time.monotonic(), []
    for n, m in chosen:
        print(f"[results] {n}/{len(everything)}: {m.command}", flush=True)
        began = time.monotonic()
        argv_ = shlex.split(m.command)
        code = subprocess.run([sys.executable, *argv_[1:]], cwd=ROOT).returncode
        print(f"[results] {n}/{len(everything)}: exit {code} after {time.monotonic() - began:.0f} s",
              flush=True)
        if code:
            failed.append(m.command)
    print(f"[results] {len(chosen)} commands in {time.monotonic() - started:.0f} s at {head}")
    behind = written_at(head) if not only else []
    for command in failed:
        print(f"[results] failed: {command}", file=sys.stderr)
    if behind:
        print(f"[results] not written at {head}: {', '.join(behind)}", file=sys.stderr)
    return 1 if failed or behind else 0
