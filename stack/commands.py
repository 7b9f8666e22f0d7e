"""The commands reference (``docs/reference/commands.md``), in two texts: the Makefile's
table, a row per target with a ``##`` line (what ``make help`` prints), in the
Makefile's order, saying what the ``#:`` lines above the target say (links relative
to ``docs/reference/``), or its ``##`` line if it has none; and the project's
management commands, each with its help and its own arguments, from its parser.

    python -m stack commands    # write both into the page (make docs does)
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from pathlib import Path

from . import pages

ROOT = Path(__file__).resolve().parent.parent
MAKEFILE = ROOT / "Makefile"
PAGE = ROOT / "docs" / "reference" / "commands.md"
COMMAND = "python -m stack commands"
MANAGE_SOURCE = "the management commands' parsers"
# Django's options, which every command has: the reference lists each command's own.
DJANGO_OPTIONS = frozenset({"help", "version", "verbosity", "settings", "pythonpath", "traceback", "no_color",
                            "force_color", "skip_checks"})

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


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _argument(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest.upper()}`"
    takes = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
    return ", ".join(f"`{option}{takes}`" for option in action.option_strings)


def _default(action: argparse.Action) -> str:
    if action.required or action.nargs == 0 or action.default in (None, argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def management_commands() -> str:
    """A section per management command of the project's own apps: its help, then
    its own arguments (Django's, which every command takes, left out)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flashsale.settings.base")  # as manage.py
    import django
    from django.core.management import get_commands, load_command_class

    from flashsale.settings import base

    django.setup()
    sections = []
    for name, app in sorted(get_commands().items()):
        if not (ROOT / app.split(".")[0]).is_dir() or app not in base.INSTALLED_APPS:
            continue  # Django's, DRF's; an app of the test settings alone (their flush)
        parser = load_command_class(app, name).create_parser("manage.py", name)
        own = [action for action in parser._actions if action.dest not in DJANGO_OPTIONS]
        rows = [f"| {_argument(a)} | {_default(a)} | {_cell(a.help or '')} |" for a in own]
        parts = [f"### `manage.py {name}`",
                 f"`{app}/management/commands/{name}.py`: {_cell(parser.description or '')}"]
        if rows:
            parts.append("\n".join(["| argument | default | what it is |", "|---|---|---|", *rows]))
        sections.append("\n\n".join(parts))
    return "\n\n".join(sections)


def page_written(page: str, makefile: str) -> str:
    """``page`` with the Makefile's table and the management commands between their
    marks.

    :raises ValueError: the page lacks the marks.
    """
    page = pages.page_written(page, COMMAND, "the Makefile", table(targets(makefile)))
    return pages.page_written(page, COMMAND, MANAGE_SOURCE, management_commands())


def write() -> bool:
    """Write the table into the page: whether it changed."""
    makefile = MAKEFILE.read_text()
    return pages.page_write(PAGE, lambda page: page_written(page, makefile))
