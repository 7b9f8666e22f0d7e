"""MkDocs hooks (``mkdocs.yml``: ``hooks``), so that the site is true of the checkout
built: the results index's table of how old each measured file is, which of the
changes that move the figures it predates, and whether it ran under today's default
settings; and on every page that includes a measured file run under other settings,
a warning beside it, which a strict build (``make docs``) refuses."""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from loadtest.measured import OUTSIDE_PROSE, PROVENANCE, settings_not_default, settings_unrecorded

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "docs" / "results" / "measured"
MARK = "<!-- the measured files' age, written as the site is built -->"
INCLUDE = re.compile(r'^--8<-- "docs/results/measured/(?P<name>[\w.-]+\.md)"$', re.MULTILINE)
# MkDocs counts the warnings of its own loggers; in strict mode, any fails the build.
log = logging.getLogger("mkdocs.hooks.measured")


def _git(*args: str) -> subprocess.CompletedProcess[str] | None:
    """``git args`` in the checkout (None: no git, or it hung)."""
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _behind(commit: str) -> str:
    """Commits on HEAD since ``commit`` that changed the code, not only the pages ("?"
    without git, or without that commit)."""
    result = _git("rev-list", "--count", f"{commit}..HEAD", "--", *OUTSIDE_PROSE)
    return result.stdout.strip() if result is not None and result.returncode == 0 else "?"


# Changes that move what the measured files measure, each by the commit that made it:
# a file measured before one ran without it.
FEATURES = (("buyers' tokens", "17dcf99"), ("payment windows", "5193563"), ("waiting rooms", "c5c4d09"),
            ("the gate's fsync before each reply", "e6b1720"))


def _has(commit: str, feature: str) -> bool | None:
    """Whether ``commit`` comes after ``feature`` (None: git cannot say)."""
    result = _git("merge-base", "--is-ancestor", feature, commit)
    return None if result is None else {0: True, 1: False}.get(result.returncode)


def predates(commit: str) -> str:
    """The features of ``FEATURES`` that ``commit`` comes before ("none"; "?": git cannot say)."""
    has = {name: _has(commit, feature) for name, feature in FEATURES}
    if None in has.values():
        return "?"
    return ", ".join(name for name, there in has.items() if not there) or "none"


def settings_said(differing: dict[str, tuple[str, str]] | None, unrecorded: Sequence[str] = ()) -> str:
    """``settings_not_default``'s answer for a measured file, and the settings it does
    not record (``settings_unrecorded``), in words."""
    if differing is None:
        return "not recorded"
    said = [f"{name} {was} (today {now})" for name, (was, now) in differing.items()]
    said += [f"{', '.join(unrecorded)} not recorded"] if unrecorded else []
    return "; ".join(said) or "the defaults"


def ages() -> str:
    """A table: each measured file, the command that wrote it, its commit and date, how
    many commits of the code HEAD is past that commit, which of ``FEATURES`` it predates, and the
    settings it ran under that are not today's defaults."""
    rows = ["| file | written by | at commit | on | code commits since | measured before | settings |",
            "|---|---|---|---|---:|---|---|"]
    for path in sorted(MEASURED.glob("*.md")):
        text = path.read_text()
        found = PROVENANCE.match(text.splitlines()[0])
        if found is None:
            rows.append(f"| `{path.name}` | ? | ? | ? | ? | ? | ? |")
            continue
        said = settings_said(settings_not_default(text), settings_unrecorded(text))
        rows.append(f"| `{path.name}` | `{found['command']}` | `{found['commit']}` | {found['date']} | "
                    f"{_behind(found['commit'])} | {predates(found['commit'])} | {said} |")
    return "\n".join(rows)


def flagged(markdown: str, where: str) -> str:
    """``markdown`` with a warning after each included measured file that ran under
    settings other than today's defaults (each also logged, which fails a strict build)."""
    def flag(include: re.Match[str]) -> str:
        differing = settings_not_default((MEASURED / include["name"]).read_text())
        if not differing:  # the defaults, or not recorded (the index says which)
            return include[0]
        said = settings_said(differing)
        log.warning("%s includes %s, measured under other settings than today's defaults: %s; "
                    "run its command again", where, include["name"], said)
        return (f"{include[0]}\n\n!!! warning \"Measured under other settings than today's defaults\"\n"
                f"    {said}: these figures are not of the stack as it starts today.\n")

    return INCLUDE.sub(flag, markdown)


# A page's include of a file outside docs/ (the README, the Kubernetes guide), whole
# or one section of it (pymdownx.snippets' "path:section").
OUTSIDE = re.compile(r'^--8<-- "(?!docs/)(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"$', re.MULTILINE)
LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")


def linked_from(text: str, source: Path, page: Path) -> str:
    """``text``, written in ``source`` (its links relative to it, right on GitHub), with
    every relative link made relative to ``page``: one into docs/ links there; one to
    any other file of the checkout (no page of the site) becomes its path as code."""
    def relinked(link: re.Match[str]) -> str:
        target = link["target"]
        if re.match(r"[a-z]+:|#", target):
            return link[0]
        path, _, anchor = target.partition("#")
        where = (source.parent / path).resolve()
        docs = ROOT / "docs"
        if where.is_relative_to(docs):
            relative = Path(os.path.relpath(where, page.parent)).as_posix()
            return f"[{link['text']}]({relative}{'#' + anchor if anchor else ''})"
        named = f"`{where.relative_to(ROOT).as_posix()}`"
        return link["text"] if link["text"] == named else f"{link['text']} ({named})"

    return LINK.sub(relinked, text)


def expanded(markdown: str, page: Path) -> str:
    """``markdown`` with each include of a file outside docs/ written out, its links
    relinked (``linked_from``): pymdownx.snippets would keep them relative to the
    file, and the strict build would find them broken."""
    def include(found: re.Match[str]) -> str:
        source = ROOT / found["path"]
        lines = source.read_text().splitlines()
        if found["section"]:
            start = next(i for i, line in enumerate(lines) if f"--8<-- [start:{found['section']}]" in line)
            end = next(i for i, line in enumerate(lines) if f"--8<-- [end:{found['section']}]" in line)
            lines = lines[start + 1:end]
        return linked_from("\n".join(lines), source, page)

    return OUTSIDE.sub(include, markdown)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARK in markdown:
        markdown = markdown.replace(MARK, ages())
    markdown = expanded(markdown, ROOT / "docs" / page.file.src_path)
    return flagged(markdown, page.file.src_path)
