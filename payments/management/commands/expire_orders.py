"""``manage.py expire_orders``: the expirer (payments.expiry)."""

import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandParser

from common.commands import CommandWithoutChecks
from common.errors import Busy
from common.liveness import heartbeat
from common.metrics import metrics_arguments, metrics_served
from orders.barrier import barrier_pass
from payments.expiry import expiry_pass, orders_expire

logger = logging.getLogger(__name__)

# Seconds between two looks for units the gate's Redis is owed (an expirer that
# stopped between its commit and Redis): at the start, then this often.
SWEEP_EVERY = 60.0


class Command(CommandWithoutChecks):
    help = ("Move unpaid orders past their payment window to expired and return their units to the "
            "sale, every interval, until SIGTERM or SIGINT; any number may run at once.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="one pass, then leave")
        parser.add_argument("--batch", type=int, default=None,
                            help="most orders per transaction (default: FLASHSALE_EXPIRY_BATCH)")
        parser.add_argument("--interval", type=float, default=None,
                            help="seconds between passes (default: FLASHSALE_EXPIRY_INTERVAL_S)")
        parser.add_argument("--alive-file", type=Path, default=None,
                            help="touch this file at every turn of the loop, for a liveness probe that "
                                 "sees the loop turn (default: none)")
        metrics_arguments(parser)

    def handle(self, *args: str, once: bool, batch: int | None, interval: float | None,
               alive_file: Path | None, **options: Any) -> None:
        interval = settings.FLASHSALE_EXPIRY_INTERVAL_S if interval is None else interval
        if once:
            done = orders_expire(batch=batch)
            self.stdout.write(f"expired {done.orders} orders, {done.units} units back on sale"
                              + (f"; {done.deferred} products deferred" if done.deferred else ""))
            return
        metrics_served(metrics_port=options["metrics_port"], metrics_address=options["metrics_address"])
        swept = -SWEEP_EVERY  # what an expirer that stopped mid-return owes the gate, first
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())  # finish the batch in hand, then leave
        while not stop.is_set():
            heartbeat(alive_file)  # a pass that fails (the database away) still turns the loop
            try:
                # Returns follow the deployment's strategy: none while an old one may
                # still sell (orders.barrier).
                barrier_pass(sku="the expirer", deadline=time.monotonic() + interval)
                sweep = time.monotonic() - swept >= SWEEP_EVERY
                if sweep:
                    swept = time.monotonic()
                done = expiry_pass(batch=batch, sweep=sweep)
            except Busy as e:
                logger.info("held: %s", e)
                continue
            except Exception:
                # A database gone costs this pass, not the process: the next one retries.
                logger.exception("an expiry pass failed")
            else:
                if done.orders:
                    logger.info("expired %d orders, %d units back on sale", done.orders, done.units)
            stop.wait(interval)
