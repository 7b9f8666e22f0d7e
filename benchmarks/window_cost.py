"""What a payment window costs the purchase, and how fast one expirer gives units back.

    python -m benchmarks.window_cost [--rounds 4] [--requests 3000] [--orders 5000] [--docs]
    (make bench-window: starts the stack, runs this)

1. **The purchase** (``benchmarks.purchase_cpu``, ``--rounds`` runs): the app's CPU a
   purchase of a sale without and with a payment window, each pair of rows one after
   the other, which first alternating from run to run (a process's first rows pay for
   what it warms): ``atomic`` over 50 products (its stored procedure), ``setnx`` over
   50 (the ORM's transaction under a Redis lock), and the gate's hot product. The window
   adds a status and an expiry to the order's INSERT and one more index to keep.
2. **The expirer** (``payments.expiry.orders_expire``, one process, in-process against
   the stack's MariaDB and Redis): ``--orders`` pending orders made due at once, then
   one call expires them all and returns their units, in batches of
   ``FLASHSALE_EXPIRY_BATCH``; orders a second, per strategy.

Writes products ``cpu-*`` and ``bench-expiry-*`` to the stack's database.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time

from loadtest.measured import recorded
from stack.config import StackConfig

from .cpu import alternated, paired
from .cpu import in_process as app_cpu

# (row without a window, with one)
ROWS = [("gate", "gate, payment window"),
        ("atomic, spread", "atomic, spread, payment window"),
        ("setnx, spread", "setnx, spread, payment window")]
EXPIRY_STRATEGIES = ["atomic", "setnx", "mysql", "gate"]


def expiry_rate(strategy: str, orders: int) -> tuple[float, int]:
    """Orders one ``orders_expire`` call expires a second, from ``orders`` due ones:
    (rate, units it returned)."""
    import django

    os.environ.update(StackConfig.from_env().app_environment("bench-expiry"))
    django.setup()
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    from orders.purchase import order_create
    from orders.reset import sale_reset
    from payments.expiry import orders_expire

    settings.FLASHSALE_BUYER_AUTH = False
    sku = f"bench-expiry-{strategy}"
    sale_reset(sku=sku, stock=orders, strategy=strategy, payment_window_s=60)
    for i in range(orders):
        order_create(sku=sku, quantity=1, user_id=f"u{i}", idempotency_key=None)
    if strategy == "gate":  # the expirer sees the orders the persisters wrote
        from common.testing import wait_until
        from orders.gate.persister import Persister
        from orders.models import Order

        persister = Persister("bench-expiry", block_ms=1, claim_idle_ms=0)
        while persister.step():
            pass
        # The stack's persisters read the same stream and may hold some of its entries
        # still: timed once every order is written. A bound on a hang, not a measure.
        wait_until(lambda: Order.objects.filter(product__sku=sku).count() >= orders, timeout=120,
                   what=f"the persisters to write {sku}'s {orders} orders")
    due = timezone.now() + timedelta(seconds=60 + settings.FLASHSALE_PAYMENT_GRACE_S + 1)
    started = time.perf_counter()
    done = orders_expire(now=due, sku=sku)
    elapsed = time.perf_counter() - started
    return done.orders / elapsed, done.units


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="in-process runs of the purchase rows")
    parser.add_argument("--requests", type=int, default=3000, help="per in-process row")
    parser.add_argument("--orders", type=int, default=5000, help="due orders the expirer is timed on")
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/window-cost.md, for the docs")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.window_cost " + shlex.join(sys.argv[1:] if argv is None else argv)

    cpu = [app_cpu(args.requests, rows=alternated(n, ROWS)) for n in range(args.rounds)]
    rates = {strategy: expiry_rate(strategy, args.orders) for strategy in EXPIRY_STRATEGIES}

    with recorded("window-cost", command, write=args.docs):
        print(f"`{command}` ({os.cpu_count()} cores shared by every process of the stack)\n")
        print(f"The purchase, in-process (`benchmarks.purchase_cpu --requests {args.requests}`, "
              f"{args.rounds} runs, each pair of rows one after the other, which first alternating): "
              "the app's CPU a purchase, "
              "µs, medians\n")
        print("| row | without a window | with one | with ÷ without | each run, with ÷ without |\n"
              "|---|---:|---:|---:|---|")
        for pair in paired(cpu, ROWS):
            print(f"| {pair.row} | {pair.without:,.0f} | {pair.with_it:,.0f} | "
                  f"**{pair.with_it / pair.without:.2f}** | {pair.each} |")
        print(f"\nThe expirer, one process: {args.orders:,} due orders, one pass "
              "(`payments.expiry.orders_expire`, batches of `FLASHSALE_EXPIRY_BATCH`)\n")
        print("| strategy | orders expired / s | units returned |\n|---|---:|---:|")
        for strategy, (rate, units) in rates.items():
            print(f"| {strategy} | **{rate:,.0f}** | {units:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
