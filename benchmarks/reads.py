"""What the product page's read costs: ``GET /api/products/<sku>`` against
``/api/ping`` through the same nginx and instances, in alternating rounds, while the
product's stock is what a sale left.

    python -m benchmarks.reads [--seconds 5] [--rounds 2] [--processes 4] [--threads 16]

The client is ``benchmarks.rejections``' (processes of threads on keep-alive
connections, so that it is not the bottleneck); every row is a ratio to ping
measured in the same run.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from benchmarks.rejections import measure
from loadtest.client import FlashsaleClient
from stack.config import StackConfig

SKU = "bench-reads"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reads", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args(argv)

    config = StackConfig.from_env()
    client = FlashsaleClient.for_stack(config)
    client.reset(SKU, stock=1000)
    for n in range(10):
        client.order(SKU, 1, f"reader-{n}").raise_for_status()
    rows: dict[str, list[float]] = {"ping": [], "product": []}
    errors = 0
    for _ in range(args.rounds):
        for row in rows:
            path = "/api/ping" if row == "ping" else f"/api/products/{SKU}"
            rate, other = measure(port=config.nginx_port, path=path,
                                  body=None, keys=None, seconds=args.seconds, processes=args.processes,
                                  threads=args.threads)
            rows[row].append(rate)
            errors += other
    ping = sum(rows["ping"]) / len(rows["ping"])
    print(f"$ python -m benchmarks.reads {shlex.join(argv or sys.argv[1:])}")
    print(f"{args.processes} processes x {args.threads} threads, {args.rounds} rounds of "
          f"{args.seconds:g} s per row; unexpected answers: {errors}\n")
    print("| row | req/s | x ping |\n|---|---:|---:|")
    for row, rates in rows.items():
        rate = sum(rates) / len(rates)
        print(f"| {row} | {rate:,.0f} | {rate / ping:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
