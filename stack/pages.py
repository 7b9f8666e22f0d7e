"""Docs pages that a command writes in part: the text between two marks (HTML
comments, unseen on the site and on a forge), written from a source of truth that a
test holds the page to."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def marks(command: str, source: str) -> tuple[str, str]:
    return (f"<!-- The text below is written by `{command}` from {source}: edit that, not it. -->",
            f"<!-- The end of the text `{command}` writes. -->")


def page_written(page: str, command: str, source: str, text: str) -> str:
    """``page`` with ``text`` between the marks of ``command``.

    :raises ValueError: the page lacks the marks.
    """
    begin, end = marks(command, source)
    start = page.find(begin)
    stop = page.find(end, start)  # a command may write two texts, from two sources
    if start < 0 or stop < start:
        raise ValueError(f"the page lacks the marks of {command}")
    return f"{page[:start]}{begin}\n\n{text.strip()}\n\n{page[stop:]}"


def page_write(path: Path, written: Callable[[str], str]) -> bool:
    """Write ``path`` as ``written`` makes it of its text (a ``page_written`` of some
    command's), if that changes it: whether it did."""
    old = path.read_text()
    new = written(old)
    if new != old:
        path.write_text(new)
    return new != old
