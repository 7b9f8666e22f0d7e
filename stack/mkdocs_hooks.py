"""MkDocs hooks (``mkdocs.yml``: ``hooks``): the results index's table of how old each
measured file is, and which of the changes that move the figures it predates, written
as the site is built, so it is true of the checkout built."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "docs" / "results" / "measured"
MARK = "<!-- the measured files' age, written as the site is built -->"
PROVENANCE = re.compile(r"Measured by `(?P<command>[^`]+)` at commit `(?P<commit>[0-9a-f]+)[^`]*` "
                        r"on (?P<date>[\d-]+)")


def _behind(commit: str) -> str:
    """Commits on HEAD since ``commit`` ("?" without git, or without that commit)."""
    try:
        result = subprocess.run(["git", "rev-list", "--count", f"{commit}..HEAD"], cwd=ROOT,
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return result.stdout.strip() if result.returncode == 0 else "?"


# Changes that move what the measured files measure, each by the commit that made it:
# a file measured before one ran without it.
FEATURES = (("buyers' tokens", "17dcf99"), ("payment windows", "5193563"), ("waiting rooms", "c5c4d09"),
            ("the gate's fsync before each reply", "e6b1720"))


def _has(commit: str, feature: str) -> bool | None:
    """Whether ``commit`` comes after ``feature`` (None: git cannot say)."""
    try:
        result = subprocess.run(["git", "merge-base", "--is-ancestor", feature, commit], cwd=ROOT,
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {0: True, 1: False}.get(result.returncode)


def predates(commit: str) -> str:
    """The features of ``FEATURES`` that ``commit`` comes before ("none"; "?": git cannot say)."""
    has = {name: _has(commit, feature) for name, feature in FEATURES}
    if None in has.values():
        return "?"
    return ", ".join(name for name, there in has.items() if not there) or "none"


def ages() -> str:
    """A table: each measured file, the command that wrote it, its commit and date, how
    many commits HEAD is past that commit, and which of ``FEATURES`` it predates."""
    rows = ["| file | written by | at commit | on | commits behind HEAD | measured before |",
            "|---|---|---|---|---:|---|"]
    for path in sorted(MEASURED.glob("*.md")):
        found = PROVENANCE.match(path.read_text().splitlines()[0])
        if found is None:
            rows.append(f"| `{path.name}` | ? | ? | ? | ? | ? |")
            continue
        rows.append(f"| `{path.name}` | `{found['command']}` | `{found['commit']}` | {found['date']} | "
                    f"{_behind(found['commit'])} | {predates(found['commit'])} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return markdown.replace(MARK, ages()) if MARK in markdown else markdown
