"""``manage.py persist_orders``: a persister of the gate's streams (orders.gate.persister)."""

import signal
import threading
from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from common.commands import CommandWithoutChecks
from common.metrics import metrics_arguments, metrics_served
from orders.gate.consumers import consumer_leave
from orders.gate.persister import Persister


class Command(CommandWithoutChecks):
    help = "Write the orders the gate accepted to MySQL, in batches, until SIGTERM or SIGINT."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", default=None,
                            help="this consumer's name in the group (default: host-pid); a restarted "
                                 "persister under its old name reads its own pending entries first")
        parser.add_argument("--batch", type=int, default=None, help="most orders per transaction "
                            "(default: FLASHSALE_GATE_BATCH)")
        parser.add_argument("--claim-idle-ms", type=int, default=None,
                            help="claim entries another consumer left pending this long "
                                 "(default: FLASHSALE_GATE_CLAIM_IDLE_MS)")
        parser.add_argument("--linger-ms", type=int, default=None,
                            help="after a round that found less than a batch, wait this long before the "
                                 "next (default: FLASHSALE_GATE_LINGER_MS)")
        parser.add_argument("--alive-file", type=Path, default=None,
                            help="touch this file at every round of the write loop, for a liveness probe "
                                 "that sees the loop turn (default: none)")
        metrics_arguments(parser)

    def handle(self, *args: str, name: str | None, batch: int | None, claim_idle_ms: int | None,
               linger_ms: int | None, alive_file: Path | None, **options: Any) -> None:
        metrics_served(metrics_port=options["metrics_port"], metrics_address=options["metrics_address"])
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())  # finish the batch in hand, then leave
        persister = Persister(name, batch=batch, claim_idle_ms=claim_idle_ms, linger_ms=linger_ms, stop=stop,
                              alive=alive_file)
        persister.run()
        consumer_leave(persister.redis, persister.name)  # its last batch acknowledged: none left behind
