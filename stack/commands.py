"""The commands reference's table (``docs/reference/commands.md``), written from the
Makefile: a row per target with a ``##`` line (what ``make help`` prints), in the
Makefile's order, saying what the ``#:`` lines above the target say (links relative
to ``docs/reference/``), or its ``##`` line if it has none.

    python -m stack commands    # write the table into the page (make docs does)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from . import pages

ROOT = Path(__file__).resolve().parent.parent
MAKEFILE = ROOT / "Makefile"
PAGE = ROOT / "docs" / "reference" / "commands.md"
COMMAND = "python -m stack commands"

_TARGET = re.compile(r"^([a-z][a-z-]*):[^#]*## (.+)$")


@dataclass(frozen=True)
class Target:
    name: str
    summary: str  # its ## line
    detail: str  # its #: lines, joined ("" if none)


def targets(makefile: str) -> list[Target]:
    """The Makefile's documented targets, in its order."""
    found, detail = [], []
    for line in makefile.splitlines():
        if line.startswith("#: "):
            detail.append(line[3:].strip())
            continue
        if match := _TARGET.match(line):
            found.append(Target(match[1], match[2].strip(), " ".join(detail)))
        detail = []
    return found


def table(documented: list[Target]) -> str:
    rows = [f"| `make {t.name}` | {t.detail or t.summary} |" for t in documented]
    return "\n".join(["| command | what it does |", "|---|---|", *rows])


def page_written(page: str, makefile: str) -> str:
    """``page`` with the table between its marks written from ``makefile``.

    :raises ValueError: the page lacks the marks.
    """
    return pages.page_written(page, COMMAND, "the Makefile", table(targets(makefile)))


def write() -> bool:
    """Write the table into the page: whether it changed."""
    makefile = MAKEFILE.read_text()
    return pages.page_write(PAGE, lambda page: page_written(page, makefile))
