"""What one Locust process costs per request: how many processes (workers) a rate needs.

    python -m benchmarks.locust_client [--rounds 3] [--requests 4000] [--users 50] [--docs]
    (make bench-locust: starts the stack, runs this)

Locust's runs (``loadtest.compare.run_locust``) against the stack's nginx, on
``/api/ping`` and on purchases of a product with stock for every request (under the
strategy the stack runs), each ``--rounds`` times, alternating: one process, and a
master with two workers (distributed). Each row's figure is the client's own CPU
(the Locust processes', from the kernel's accounting of this process's children) a
request, and so the requests one client core sends a second at most: each round runs
the row twice, with ``--requests`` and a fifth of them, and the difference leaves out
what a run costs before its first request (Locust's start, the users' spawn). A worker is one
process on one core: a rate of R requests a second needs R over that figure workers,
at least, with headroom for what the figure does not count (a slower network, larger
answers). The client's CPU does not depend on how fast the server answers, so the
figure holds where the server is another machine; the wall-clock rate beside it does
not (the servers share these cores). Writes products ``bench-locust-*``.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

from loadtest.buyers import buyers_file
from loadtest.client import FlashsaleClient
from loadtest.compare import BUYER_PREFIX, run_locust
from loadtest.measured import recorded
from stack.config import StackConfig

from .cpu import children_cpu

STOCK = 10_000_000
RATES = (10_000, 50_000, 200_000)


def one_run(config: StackConfig, args, scratch: Path, *, endpoint: str, workers: int, n: int,
            tokens: Path | None, requests: int) -> tuple[float, float, int]:
    """(client CPU s, wall s from the first request to the last answer, requests) of one
    Locust run."""
    sku = "-"
    if endpoint == "purchase":
        sku = f"bench-locust-{os.getpid()}-{n}-{requests}"
        FlashsaleClient.for_stack(config).reset(sku, STOCK)
    cpu = children_cpu()
    run = run_locust(base_url=config.base_url, out=scratch / f"{endpoint}-{workers}-{n}-{requests}", sku=sku,
                     endpoint=endpoint, users=args.users, attempts=requests, retry_share=0,
                     tokens=tokens, workers=workers)
    seconds = max(a[1] for a in run.answers) - min(a[0] for a in run.answers)
    return children_cpu() - cpu, seconds, len(run.answers)


def measured(config: StackConfig, args, scratch: Path, *, endpoint: str, workers: int, n: int,
             tokens: Path | None) -> tuple[float, float]:
    """(client CPU s a request, beyond a run's start; wall requests a second) of one round."""
    few = one_run(config, args, scratch, endpoint=endpoint, workers=workers, n=n, tokens=tokens,
                  requests=args.requests // 5)
    many = one_run(config, args, scratch, endpoint=endpoint, workers=workers, n=n, tokens=tokens,
                   requests=args.requests)
    return (many[0] - few[0]) / (many[2] - few[2]), many[2] / many[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=4000, help="requests a run")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--docs", action="store_true",
                        help="also write the table to docs/results/measured/locust-client.md")
    args = parser.parse_args(argv)
    config = StackConfig.from_env()
    command = "python -m benchmarks.locust_client " + shlex.join(argv if argv is not None else sys.argv[1:])
    rows = [(endpoint, workers) for endpoint in ("ping", "purchase") for workers in (1, 2)]
    found: dict[tuple[str, int], list[tuple[float, float]]] = {row: [] for row in rows}
    with tempfile.TemporaryDirectory(prefix="flashsale-locust-") as scratch:
        tokens = (buyers_file(config, Path(scratch) / "buyers.tsv", prefix=BUYER_PREFIX, count=args.users)
                  if config.buyer_auth else None)
        for n in range(args.rounds):
            # Each round in the other order: a row that always ran first would pay for
            # what warms up.
            for endpoint, workers in rows if n % 2 == 0 else rows[::-1]:
                found[(endpoint, workers)].append(measured(config, args, Path(scratch), endpoint=endpoint,
                                                           workers=workers, n=n, tokens=tokens))
                print(f"  round {n + 1}/{args.rounds}: {endpoint}, {workers} process(es) done", flush=True)
    with recorded("locust-client", command, write=args.docs):
        print(f"Locust against the stack's nginx, {args.users} users, {args.requests:,} requests a run, "
              f"{args.rounds} rounds a row, alternating; medians. *Processes*: 1 is one Locust process, 2 a "
              "master and two workers (`LOCUST_WORKERS=2`). The client's CPU is every Locust process's, "
              "master included, a request beyond the run's start (a run of a fifth as many requests "
              "taken from it).\n")
        print("| requests | processes | client CPU µs a request | requests a client core-second | "
              "wall req/s (cores shared with the servers) |")
        print("|---|---:|---:|---:|---:|")
        per_core = {}
        for endpoint, workers in rows:
            runs = found[(endpoint, workers)]
            cpu_us = statistics.median(cpu * 1e6 for cpu, _ in runs)
            wall = statistics.median(rate for _, rate in runs)
            per_core[(endpoint, workers)] = 1e6 / cpu_us
            label = "`/api/ping`" if endpoint == "ping" else "purchases"
            print(f"| {label} | {workers} | {cpu_us:,.0f} | {1e6 / cpu_us:,.0f} | {wall:,.0f} |")
        one = per_core[("purchase", 1)]
        print(f"\nWorkers a rate of purchases needs, at one core each and the purchases' figure for one "
              f"process ({one:,.0f} a core-second), with a quarter of headroom: "
              + ", ".join(f"{rate:,} a second: {math.ceil(rate / one / 0.75)}" for rate in RATES) + ".")
    return 0


if __name__ == "__main__":
    sys.exit(main())
