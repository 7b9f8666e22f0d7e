"""``make demo``: the same burst of concurrent purchases through nginx, once per
strategy, and a table of what each did to the stock.

    python -m loadtest.demo [--strategies none,local,atomic] [--stock 50]
                            [--attempts 400] [--concurrency 32] [--section-delay-ms 5] [--docs]

Each strategy gets its own product (``burst-<strategy>``), left as it ended, so
``http://127.0.0.1:8080/?sku=burst-none`` shows its audit afterwards; ``demo-1`` is
seeded with 100 units for the browser page. Then a sale with a payment window
(``demo-pay``): half its first buyers never pay, their units come back, and the next
buyers buy them. The stack is left running with the strategy it had before. With
``--docs``, the burst's table is written where the README shows it (between its
marks), under the line that says what ran, at which commit, where.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from common.strategies import STRATEGIES, strategy_get
from stack import pages
from stack.config import ROOT, StackConfig
from stack.control import reconfigure

from .burst import BurstResult, burst
from .buyers import buyer_tokens
from .client import FlashsaleClient
from .measured import provenance

PAGE_SKU = "demo-1"
BUYER_PREFIX = "burst-buyer-"  # the n-th attempt of every burst is burst-buyer-<n>


@dataclass(frozen=True)
class Row:
    strategy: str
    result: BurstResult
    audit: dict


def run_strategy(config: StackConfig, client: FlashsaleClient, strategy: str, *,
                 stock: int, attempts: int, concurrency: int, section_delay_ms: float,
                 tokens: Mapping[str, str] | None = None) -> Row:
    reconfigure(config.replace(strategy=strategy, section_delay_ms=section_delay_ms))
    sku = f"burst-{strategy}"
    client.reset(sku, stock, name=f"Burst under {strategy}")
    result = burst(base_url=config.base_url, sku=sku, attempts=attempts, concurrency=concurrency,
                   tokens=tokens, prefix=BUYER_PREFIX)
    return Row(strategy=strategy, result=result, audit=client.audit(sku))


def table(rows: list[Row]) -> str:
    header = ["strategy", "attempts", "orders", "sold out", "busy", "errors", "retries",
              "oversold", "lost updates", "ledger consistent", "wall s"]
    lines = [header]
    for row in rows:
        r, a = row.result, row.audit
        lines.append([
            row.strategy, str(r.attempts), str(a["orders"]), str(r.sold_out), str(r.busy),
            str(r.errors), str(a["retries"]), str(a["oversold"]), str(a["lost_updates"]),
            "yes" if a["consistent"] else "NO", f"{r.seconds:.2f}",
        ])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

    def fmt(line: list[str]) -> str:  # first column left-aligned, figures right-aligned
        cells = (c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True)))
        return "| " + " | ".join(cells) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([fmt(lines[0]), rule, *(fmt(line) for line in lines[1:])])


PAY_SKU = "demo-pay"


def payment_window_round(client: FlashsaleClient, *, stock: int = 20, window_s: int = 3,
                         strategy: str = "atomic") -> dict:
    """A sale whose orders must be paid within ``window_s``: ``stock`` buyers buy it
    out and half of them pay; the other half's units come back when the expirer
    passes, and as many new buyers buy and pay for them. What each order became, from
    the API, and the sale's audit."""
    client.reset(PAY_SKU, stock, name="Pay-or-release phone", strategy=strategy, payment_window_s=window_s)
    run = uuid.uuid4().hex[:8]  # idempotency keys outlive a reset
    started = time.monotonic()

    def wave(prefix: str, n: int, paying: int) -> list[tuple[str, int]]:
        orders = []
        for i in range(n):
            buyer = f"{prefix}-{i}"
            placed = client.order(PAY_SKU, 1, buyer, key=f"{run}-{buyer}")
            placed.raise_for_status()
            orders.append((buyer, placed.json()["order_id"]))
        for buyer, order_id in orders[:paying]:
            client.pay(order_id, buyer, key=f"{run}-pay-{order_id}").raise_for_status()
        return orders

    first = wave("pay-first", stock, stock // 2)
    refused = client.order(PAY_SKU, 1, "pay-late", key=f"{run}-late").json().get("error")
    while client.audit(PAY_SKU)["returned_quantity"] < stock - stock // 2:  # the expirer, every second
        if time.monotonic() - started > 60:
            raise RuntimeError("the unpaid units did not come back within a minute: is the expirer running?")
        time.sleep(0.25)
    returned_after = time.monotonic() - started
    second = wave("pay-second", stock - stock // 2, stock - stock // 2)
    statuses: dict[str, int] = {}
    for buyer, order_id in first + second:
        for _ in range(100):  # the provider's webhook, maybe late
            status = client.order_detail(order_id, buyer).json()["payment_status"]
            if status != "pending" or (buyer, order_id) in first[stock // 2:]:
                break
            time.sleep(0.1)
        statuses[status] = statuses.get(status, 0) + 1
    return {"stock": stock, "window_s": window_s, "strategy": strategy, "sold_out_before": refused,
            "returned_after_s": returned_after, "statuses": statuses, "audit": client.audit(PAY_SKU)}


def payment_summary(round_: dict) -> str:
    a, st = round_["audit"], round_["statuses"]
    return (f"A sale with a {round_['window_s']} s payment window ({round_['strategy']}, {PAY_SKU}): "
            f"{round_['stock']} units bought out (the next buyer: {round_['sold_out_before']}), half of them "
            f"never paid; their {a['returned_quantity']} units came back {round_['returned_after_s']:.1f} s "
            f"after the start and sold again.\n"
            f"  orders {a['orders']}: paid {st.get('paid', 0)}, expired {st.get('expired', 0)} · "
            f"units held {a['ordered_quantity']} of {a['initial_stock']}, left {a['remaining']} · "
            f"oversold {a['oversold']} · ledger consistent {'yes' if a['consistent'] else 'NO'}")


README = ROOT / "README.md"
README_SOURCE = "a run of it"


def burst_said(args, config: StackConfig) -> str:
    return (f"Burst: {args.attempts} purchases of 1 unit from {args.concurrency} buyers at once, "
            f"stock {args.stock}, {config.instances} instances behind nginx, "
            f"critical-section delay {args.section_delay_ms:g} ms")


def readme_written(command: str, text: str) -> None:
    """The README's demo table, written between its marks under its provenance line."""
    measured = provenance(command) + "\n\n" + text  # before the write: its commit is clean
    pages.page_write(README, lambda page: pages.page_written(page, command, README_SOURCE, measured))
    print(f"written for the docs: {README}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--stock", type=int, default=50)
    parser.add_argument("--attempts", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--section-delay-ms", "--race-delay-ms", type=float, default=5.0,
                        help="sleep inside the critical section so the race shows (default 5)")
    parser.add_argument("--docs", action="store_true",
                        help="also write the burst's table into the README, where it shows one")
    args = parser.parse_args(argv)
    strategies = [strategy_get(name.strip()).name for name in args.strategies.split(",")]

    config = StackConfig.from_env()
    client = FlashsaleClient.for_stack(config)
    print(burst_said(args, config) + "\n", flush=True)
    client.reset(PAGE_SKU, 100, name="Demo phone")  # what the browser page shows
    # Each attempt a buyer of its own, an account with its token when the instances
    # take the buyer from credentials (the default).
    tokens = buyer_tokens(config, prefix=BUYER_PREFIX, count=args.attempts) if config.buyer_auth else None
    rows = []
    try:
        for strategy in strategies:
            rows.append(run_strategy(config, client, strategy, stock=args.stock,
                                     attempts=args.attempts, concurrency=args.concurrency,
                                     section_delay_ms=args.section_delay_ms, tokens=tokens))
    finally:
        reconfigure(config)  # back to the strategy the stack was started with
    print()
    print(table(rows))
    if args.docs:
        command = "python -m loadtest.demo " + shlex.join(argv if argv is not None else sys.argv[1:])
        readme_written(command.strip(), burst_said(args, config) + "\n\n" + table(rows))
    paid = payment_window_round(client)
    print()
    print(payment_summary(paid))

    broken = [row.strategy for row in rows
              if strategy_get(row.strategy).claims_correct and not row.audit["consistent"]]
    print(f"\nBuy from the browser: {config.base_url}/ (sku {PAGE_SKU}, 100 in stock). "
          f"Each burst's product is still there: {config.base_url}/?sku=burst-<strategy>")
    if broken:
        print(f"FAIL: {', '.join(broken)} claim correctness but oversold or lost updates",
              file=sys.stderr)
        return 1
    held = paid["audit"]
    if not held["consistent"] or held["oversold"] or paid["statuses"].get("paid", 0) != paid["stock"]:
        print("FAIL: the sale with a payment window did not end with every unit paid once", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
