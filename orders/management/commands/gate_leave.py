"""``manage.py gate_leave``: hand the gate's sales of the default's products to the database."""

import time
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from common.commands import CommandWithoutChecks
from common.errors import ApplicationError
from orders.gate.lifecycle import gate_leave


class Command(CommandWithoutChecks):
    help = ("Once the deployment's strategy left the gate and no instance sells under it: wait until the "
            "persisters have written the gate's sales of the products that follow the default, then close "
            "them in Redis (`make up` does this at a switch away from the gate).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--within", type=float, default=60.0,
                            help="seconds the persisters have to write them (default 60)")
        parser.add_argument("--after", type=Path, metavar="FILE",
                            help="first wait (as long again) until FILE exists: started before the last "
                                 "instance under the gate stops, the command is ready when it has")

    def handle(self, *args: str, within: float, after: Path | None, **options: Any) -> None:
        began = time.monotonic()
        if after is not None:
            self.stdout.write(f"waiting for {after}")  # the stack holds no purchase before this
            self.stdout.flush()
            deadline = began + within
            while not after.exists():
                if time.monotonic() > deadline:
                    raise CommandError(f"{after} not there within {within:g} s: nothing handed over")
                time.sleep(0.01)
        cued = time.monotonic()
        try:
            skus = gate_leave(within=within)
        except ApplicationError as e:
            raise CommandError(e.message) from e
        # Its wait for the cue: none, and its own start was in the handover.
        self.stdout.write(f"handed to the database: {' '.join(skus) or 'no sale'} ({len(skus)} in "
                          f"{time.monotonic() - cued:.2f} s, after {cued - began:.2f} s waiting for its cue)")
