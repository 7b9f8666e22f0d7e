"""Run scenarios from the catalog and print each broken variant beside its fix.

    python -m scenarios S6            # one
    python -m scenarios all           # every scenario
    python -m scenarios --list        # what there is
    python -m scenarios --markdown    # the catalog into docs/reference/scenarios.md
    python -m scenarios all --docs    # and the tables into docs/results/measured/scenarios.md

Uses the local stack (Redis database 4, its ZooKeeper, its MariaDB, nginx for the
scenarios that buy); `make scenario S=S6` starts the stack first.
Exits 1 if a scenario did not come out as its source says.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from pathlib import Path

import django

# Some scenarios use the models, and the catalog imports them all: Django first.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flashsale.settings.base")
django.setup()

from loadtest.client import FlashsaleClient  # noqa: E402
from loadtest.measured import measured_write  # noqa: E402
from stack import pages  # noqa: E402
from stack.config import StackConfig  # noqa: E402
from stack.control import apps_as_needed  # noqa: E402

from .base import render, render_markdown  # noqa: E402
from .catalog import CATALOG  # noqa: E402
from .context import Context  # noqa: E402

PAGE = Path(__file__).resolve().parent.parent / "docs" / "reference" / "scenarios.md"
COMMAND = "python -m scenarios --markdown"


def markdown() -> str:
    """The catalogue, as the scenarios page shows it: a section per scenario."""
    lines = []
    for s in CATALOG.values():
        lines += [f"## {s.id}: {s.title}", "", f"Source: {sources_linked(s.seed)}.", "", s.story, ""]
    return "\n".join(lines)


def page_written(page: str) -> str:
    """The scenarios page with the catalogue written into it."""
    return pages.page_written(page, COMMAND, "the scenarios' code (scenarios/)", markdown())


ARTICLE = re.compile(r"\b(00[0-4])\b")


def sources_linked(seed: str) -> str:
    """A scenario's source, each article number a link to its entry in the sources
    page, and a project's name to the projects' (beside the scenarios page)."""
    if not ARTICLE.search(seed):
        return f"[{seed}](sources.md#projects)"
    return ARTICLE.sub(r"[article \1](sources.md#article-\1)", seed)


def source_named(seed: str) -> str:
    """A scenario's source as the terminal shows it: "article 001 ①", or a project's name."""
    return "source: " + ARTICLE.sub(r"article \1", seed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("ids", nargs="*", help="scenario ids (S2, S6, ...) or 'all'")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--docs", action="store_true",
                        help="also write every table to docs/results/measured/scenarios.md (with 'all')")
    args = parser.parse_args(argv)
    if args.markdown:
        changed = pages.page_write(PAGE, page_written)
        print(f"{PAGE.name}: " + ("the catalogue written" if changed else "the catalogue as it was"))
        return 0
    if args.list or not args.ids:
        for s in CATALOG.values():
            print(f"{s.id:4} {s.title}  [{source_named(s.seed)}]")
        return 0
    ids = list(CATALOG) if args.ids == ["all"] else [i.upper() for i in args.ids]
    unknown = [i for i in ids if i not in CATALOG]
    if unknown:
        parser.error(f"no scenario {', '.join(unknown)}; there are: {', '.join(CATALOG)}")
    if args.docs and args.ids != ["all"]:
        parser.error("--docs writes the whole catalog's tables: run it with 'all'")
    command = "python -m scenarios " + shlex.join(argv if argv is not None else sys.argv[1:])
    tables = []

    config = StackConfig.from_env()
    url = f"redis://127.0.0.1:{config.redis_port}/4"
    unexpected = []
    # Scenarios that restart the app instances (S1) get them back as started.
    with apps_as_needed(config) as use:
        def apps(**changes) -> FlashsaleClient:
            return FlashsaleClient.for_stack(use(**changes))

        for scenario_id in ids:
            scenario = CATALOG[scenario_id]
            source = source_named(scenario.seed)
            print(f"\n== {scenario.id}: {scenario.title}  [{source}]\n{scenario.story}\n", flush=True)
            ctx = Context(url, zk_hosts=config.zk_hosts, base_url=config.base_url,
                          admin_token=config.admin_token(), buyer_auth=config.buyer_auth, apps=apps)
            try:
                outcome = scenario.run(ctx)
            finally:
                ctx.close()
            print(render(scenario, outcome))
            tables.append(render_markdown(scenario, outcome))
            if not outcome.as_expected:
                unexpected.append(scenario_id)
    if args.docs:
        measured_write("scenarios", command, "\n\n".join(tables))
    if unexpected:
        print(f"\nNot as the sources say: {', '.join(unexpected)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
