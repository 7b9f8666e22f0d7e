"""``make results``: every measured figure of the docs measured again, at one commit.

Each file under ``docs/results/measured/`` (and the README's demo table) names the
command that wrote it on its first line. This runs each of those commands once, in
turn, against the running stack, on a clean tree: the files they write then all name
the same commit, which no hand picked. What a command changes is only what it writes
(``loadtest.measured``: those files do not count as uncommitted changes), so one
command's output does not mark the next one's commit as modified.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.measured import MEASURED, OUTPUTS, PROVENANCE, uncommitted

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
            if named is None or not commit.startswith(named["commit"]):
                behind.append(name)
    return behind


def _head() -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def main(*, list_only: bool = False, only: str = "") -> int:
    """Run the commands (those containing ``only``), or with ``list_only`` name them."""
    chosen = [m for m in measurements() if only in m.command]
    if list_only:
        for m in chosen:
            print(f"{m.command}\n    writes {', '.join(m.files)}")
        return 0
    changed = uncommitted()
    if changed:
        print("[results] refused: the tree has uncommitted changes (outside what the commands write, "
              f"{', '.join(OUTPUTS)}), so no commit would name what was measured:\n{changed}",
              file=sys.stderr)
        return 2
    head, started, failed = _head(), time.monotonic(), []
    for n, m in enumerate(chosen, 1):
        print(f"[results] {n}/{len(chosen)}: {m.command}", flush=True)
        began = time.monotonic()
        argv_ = shlex.split(m.command)
        code = subprocess.run([sys.executable, *argv_[1:]], cwd=ROOT).returncode
        print(f"[results] {n}/{len(chosen)}: exit {code} after {time.monotonic() - began:.0f} s", flush=True)
        if code:
            failed.append(m.command)
    print(f"[results] {len(chosen)} commands in {time.monotonic() - started:.0f} s at {head[:7]}")
    behind = written_at(head) if not only else []
    for command in failed:
        print(f"[results] failed: {command}", file=sys.stderr)
    if behind:
        print(f"[results] not written at {head[:7]}: {', '.join(behind)}", file=sys.stderr)
    return 1 if failed or behind else 0
