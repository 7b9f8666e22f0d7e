"""``manage.py buyers_make N --out FILE``: N buyers for a load test, with their tokens."""

import time
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from buyers.services import buyers_make
from common.commands import CommandWithoutChecks
from common.errors import ApplicationError


class Command(CommandWithoutChecks):
    help = ("Make N buyers named <prefix><n> in bulk (no passwords: they buy with their tokens) and write "
            "one line per buyer to FILE: its name, a tab, its bearer token. Buyers made before are kept and "
            "given new tokens.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("count", type=int)
        parser.add_argument("--out", required=True, help="the file to write (name<TAB>token a line)")
        parser.add_argument("--prefix", default="load-buyer-")
        parser.add_argument("--hours", type=float, default=1.0, help="how long the tokens last")

    def handle(self, *args: str, count: int, out: str, prefix: str, hours: float, **options: Any) -> None:
        if count < 1:
            raise CommandError("make at least one buyer")
        started = time.perf_counter()
        try:
            made = buyers_make(count=count, prefix=prefix, seconds=round(hours * 3600))
        except ApplicationError as e:
            raise CommandError(e.message) from e
        Path(out).write_text("".join(f"{name}\t{token}\n" for name, token in made))
        self.stdout.write(f"{count} buyers ({prefix}0 to {prefix}{count - 1}) and their tokens in {out}, "
                          f"{time.perf_counter() - started:.1f} s")
