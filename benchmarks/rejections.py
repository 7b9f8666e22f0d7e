"""What a refusal costs: sold-out purchases, each with a key of its own, against
``/api/ping`` through the same nginx and instances, in alternating rounds.

    python -m benchmarks.rejections [--seconds 5] [--rounds 2] [--processes 4] [--threads 16]

Three rows besides ping:

- ``marked``: the sale's state in Redis says sold out and vouches for the
  idempotency flags: the answer comes from Redis alone.
- ``mark lost``: the mark is deleted before the round, as a Redis restart or flush
  would: the purchase finds the stock empty the slow way, and (since the flags
  can no longer vouch that the key has no order) looks its key up in the database.
- ``replays``: every request repeats a key that bought (the answer is its order).

The client is several processes of threads on keep-alive connections, so that it is
not the bottleneck; every row is a ratio to ping measured in the same run.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import shlex
import sys
import time
import uuid

import redis

from loadtest.client import FlashsaleClient
from loadtest.measured import recorded
from stack.config import StackConfig

SKU = "bench-rejections"


def _worker(port: int, path: str, body: dict | None, keys: list[str] | None, seconds: float,
            threads: int, signed: dict, out: multiprocessing.Queue) -> None:
    import threading

    counts = {"ok": 0, "other": 0}
    mutex = threading.Lock()
    deadline = time.monotonic() + seconds

    def loop(n: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        ok = other = 0
        i = n
        while time.monotonic() < deadline:
            if body is None:
                conn.request("GET", path)
            else:
                key = keys[i % len(keys)] if keys else uuid.uuid4().hex
                i += threads
                conn.request("POST", path, body=json.dumps(body),
                             headers={"Content-Type": "application/json", "Idempotency-Key": key, **signed})
            response = conn.getresponse()
            response.read()
            expected = 200 if body is None or keys else 409
            if response.status == expected:
                ok += 1
            else:
                other += 1
        with mutex:
            counts["ok"] += ok
            counts["other"] += other

    pool = [threading.Thread(target=loop, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    out.put(counts)


def measure(*, port: int, path: str, body: dict | None, keys: list[str] | None, seconds: float,
            processes: int, threads: int, signed: dict | None = None) -> tuple[float, int]:
    """Requests per second answered as expected, and how many were not; ``signed``:
    a purchase's credentials (headers)."""
    out: multiprocessing.Queue = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=_worker,
                                       args=(port, path, body, keys, seconds, threads, signed or {}, out))
               for _ in range(processes)]
    for w in workers:
        w.start()
    totals = [out.get() for _ in workers]
    for w in workers:
        w.join()
    return sum(t["ok"] for t in totals) / seconds, sum(t["other"] for t in totals)


def crowd_arguments(prog: str, doc: str | None, argv: list[str] | None) -> argparse.Namespace:
    """The options of a benchmark run with ``measure``'s client."""
    parser = argparse.ArgumentParser(prog=prog, description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/, for the docs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = crowd_arguments("python -m benchmarks.rejections", __doc__, argv)

    config = StackConfig.from_env()
    client = FlashsaleClient.for_stack(config)
    store = redis.Redis(port=config.redis_port)
    client.reset(SKU, stock=200)
    bought = [uuid.uuid4().hex for _ in range(200)]
    for key in bought:
        client.order(SKU, 1, "bench-user", key=key).raise_for_status()
    client.order(SKU, 1, "bench-user")  # finds the stock at 0: the mark says sold out
    purchase, signed = client.as_buyer("bench-user")
    purchase |= {"sku": SKU, "quantity": 1}
    rows: dict[str, list[float]] = {"ping": [], "marked": [], "mark lost": [], "replays": []}
    errors = 0
    common = dict(port=config.nginx_port, seconds=args.seconds, processes=args.processes,
                  threads=args.threads, signed=signed)
    for _ in range(args.rounds):
        for row in rows:
            if row == "mark lost":
                # The sale's state (orders.salestate's keys), as a restart loses it.
                state = store.keys(f"*sale:{SKU}:*")
                if not state:
                    raise SystemExit(f"no sale state of {SKU} in Redis: did orders.salestate rename them?")
                store.delete(*state)
            rate, other = measure(path="/api/ping" if row == "ping" else "/api/orders",
                                  body=None if row == "ping" else purchase,
                                  keys=bought if row == "replays" else None, **common)
            rows[row].append(rate)
            errors += other
    ping = sum(rows["ping"]) / len(rows["ping"])
    command = f"python -m benchmarks.rejections {shlex.join(argv or sys.argv[1:])}".rstrip()
    with recorded("rejections", command, write=args.docs):
        print(f"`{command}`: {args.processes} processes x {args.threads} threads, {args.rounds} rounds "
              f"of {args.seconds:g} s per row; unexpected answers: {errors}\n")
        print("| row | req/s | x ping |\n|---|---:|---:|")
        for row, rates in rows.items():
            rate = sum(rates) / len(rates)
            print(f"| {row} | {rate:,.0f} | {rate / ping:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
