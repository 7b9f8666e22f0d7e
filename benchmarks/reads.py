"""What the product page's read costs, and how far behind its stock figure is.

    python -m benchmarks.reads [--seconds 5] [--rounds 2] [--processes 4] [--threads 16]

Rates, in alternating rounds, each a ratio to ``/api/ping`` measured the same way:

- through nginx (its half-second product cache in front): ``GET /api/products/<sku>``
  against ``/api/ping`` through nginx;
- the apps' own cache: the same two requests sent straight to ``app1``, past nginx.

Then the **lag**: one buyer buys a unit every 50 ms through nginx while 8 readers
read the product through nginx; a read that shows more stock than the database had
at that moment is as late as the time since the purchase that made its figure
untrue. Reported as p50/p99/max over every read.

The client is ``benchmarks.rejections``' (processes of threads on keep-alive
connections, so that it is not the bottleneck); every row is a ratio to ping
measured in the same run.
"""

from __future__ import annotations

import bisect
import shlex
import sys
import threading
import time

from benchmarks.rejections import crowd_arguments, measure
from loadtest.client import FlashsaleClient
from loadtest.measured import recorded
from stack.config import StackConfig

SKU = "bench-reads"


def main(argv: list[str] | None = None) -> int:
    args = crowd_arguments("python -m benchmarks.reads", __doc__, argv)

    config = StackConfig.from_env()
    client = FlashsaleClient.for_stack(config)
    client.reset(SKU, stock=1000)
    for n in range(10):
        client.order(SKU, 1, f"reader-{n}").raise_for_status()
    app1 = config.app_port_of(config.app_names[0])
    targets = {"ping, nginx": (config.nginx_port, "/api/ping"),
               "product, nginx": (config.nginx_port, f"/api/products/{SKU}"),
               "ping, app1": (app1, "/api/ping"),
               "product, app1": (app1, f"/api/products/{SKU}")}
    rows: dict[str, list[float]] = {row: [] for row in targets}
    errors = 0
    for _ in range(args.rounds):
        for row, (port, path) in targets.items():
            rate, other = measure(port=port, path=path, body=None, keys=None, seconds=args.seconds,
                                  processes=args.processes, threads=args.threads)
            rows[row].append(rate)
            errors += other
    rate = {row: sum(rates) / len(rates) for row, rates in rows.items()}
    lags = measure_lag(client, seconds=args.seconds)
    command = f"python -m benchmarks.reads {shlex.join(argv or sys.argv[1:])}".rstrip()
    with recorded("reads", command, write=args.docs):
        print(f"`{command}`: {args.processes} processes x {args.threads} threads, {args.rounds} rounds "
              f"of {args.seconds:g} s per row; unexpected answers: {errors}\n")
        print("| row | req/s | x ping (same way) |\n|---|---:|---:|")
        for row in targets:
            ping = rate[row.replace("product", "ping")]
            print(f"| {row} | {rate[row]:,.0f} | {rate[row] / ping:.2f} |")
        product_nginx = rate["product, nginx"] / rate["ping, app1"]
        print(f"\nproduct through nginx / ping straight to app1: {product_nginx:.2f}")
        print(f"\nstock lag through nginx over {len(lags)} reads: p50 {_pct(lags, 50):.0f} ms, "
              f"p99 {_pct(lags, 99):.0f} ms, max {max(lags):.0f} ms")
    return 0


def measure_lag(client: FlashsaleClient, *, seconds: float) -> list[float]:
    """Lags in ms of every read of the product through nginx while a buyer buys a
    unit every 50 ms (see the module's docstring)."""
    sku = f"{SKU}-lag"
    client.reset(sku, stock=100_000)
    # (when, stock after) of each purchase, in order: written by the buyer only.
    sales: list[tuple[float, int]] = [(time.time(), 100_000)]
    reads: list[tuple[float, int]] = []
    stop = threading.Event()
    mutex = threading.Lock()

    def buyer() -> None:
        n = 0
        while not stop.is_set():
            answer = client.order(sku, 1, f"lag-buyer-{n % 1000}")
            if answer.status_code == 201:
                sales.append((time.time(), answer.json()["remaining"]))
            n += 1
            time.sleep(0.05)

    def reader() -> None:
        import requests

        session = requests.Session()
        while not stop.is_set():
            shown = session.get(f"{client.base_url}/api/products/{sku}", timeout=10).json()["stock"]
            with mutex:
                reads.append((time.time(), shown))

    threads = [threading.Thread(target=buyer)] + [threading.Thread(target=reader) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    # Stock only falls: the figure a read shows stopped being true at the first sale
    # that took the stock below it.
    times = [t for t, _ in sales]
    lags = []
    for at, shown in reads:
        truth_index = bisect.bisect_right(times, at) - 1
        if sales[truth_index][1] >= shown:
            lags.append(0.0)
            continue
        untrue_since = next(t for t, left in sales if left < shown)
        lags.append((at - untrue_since) * 1000)
    return lags


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))]


if __name__ == "__main__":
    sys.exit(main())
