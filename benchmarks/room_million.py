"""A million buyers in one sale's waiting room: what a place costs in memory and in
the room's Redis's CPU, what an ask costs with a million waiting, and whether the
room admits at its rate with that many behind.

    python -m benchmarks.room_million [--places 1000000] [--http 4000] [--rate 1000]
                                      [--seconds 10] [--docs]
    (make bench-room-million: starts the stack, runs this)

On the stack (the room lives in the gate's Redis, ``waitingroom.store``):

1. A sale with a waiting room is reset through the admin API, opening in a day, so
   that nobody is admitted while the room fills; the benchmark then makes its room
   count no address (every buyer of the benchmark comes from one) and forget no
   place (an hour before a place is abandoned: the rate measured is the room's, not
   its skips').
2. ``--places`` places are taken through the room's store (``room_join_many``: the
   room's own script, the asks sent in batches): the Redis server's memory
   (``used_memory``) and CPU (its own ``used_cpu_*``) before and after, a place.
3. With them waiting: asks by buyers who hold a place, in batches (Redis's CPU an
   ask), and one at a time (the store's round trip, p50/p99); then ``--http`` new
   buyers ask through nginx and the apps, 16 at a time (each takes a place behind the
   million: the answer's latency, p50/p99).
4. The sale opens (the room's record of its opening moved to now) and a driver asks,
   as a waiting buyer would, every 5 ms for ``--seconds``: the room admits as asks
   find it; the admissions a second against ``--rate``.

The room is dropped at the end. Writes products ``bench-room-million-*``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from loadtest.buyers import buyer_tokens
from loadtest.client import FlashsaleClient
from loadtest.figures import percentile
from loadtest.measured import recorded
from stack.config import StackConfig

os.environ.update(StackConfig.from_env().app_environment("bench"))

import django  # noqa: E402

django.setup()

from common.gateredis import gate_redis  # noqa: E402
from waitingroom import store  # noqa: E402

BATCH = 2000  # asks a round trip while filling
DAY_S = 86_400


def redis_now() -> tuple[int, float]:
    """The room's Redis's used memory (bytes) and CPU so far (s)."""
    info = gate_redis().info()
    return int(info["used_memory"]), float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def asks_a_second(waiting: int, rate: int) -> float:
    """The asks a second of ``waiting`` buyers, each asking when the room tells it."""
    return sum(1000 / store.ask_interval_ms(ahead, rate) for ahead in range(waiting))


def fill(sku: str, places: int) -> tuple[float, float, float]:
    """(bytes a place, Redis CPU µs a place, places a second) for ``places`` places."""
    memory, cpu = redis_now()
    started = time.monotonic()
    joined = 0
    for first in range(0, places, BATCH):
        batch = [f"w{n}" for n in range(first, min(first + BATCH, places))]
        joined += store.room_join_many(sku=sku, buyers=batch)
    seconds = time.monotonic() - started
    assert joined == places, (joined, places)
    memory_after, cpu_after = redis_now()
    return (memory_after - memory) / places, (cpu_after - cpu) / places * 1e6, places / seconds


def asks_waiting(sku: str, places: int, count: int) -> tuple[float, list[float]]:
    """(Redis CPU µs an ask in batches, one-at-a-time round trips in ms) of asks by
    buyers who hold a place, spread over the queue."""
    step = max(places // count, 1)
    buyers = [f"w{n}" for n in range(0, places, step)][:count]
    _, cpu = redis_now()
    for first in range(0, len(buyers), BATCH):
        store.room_join_many(sku=sku, buyers=buyers[first:first + BATCH])
    _, cpu_after = redis_now()
    trips = []
    for buyer in buyers[:1000]:
        started = time.perf_counter()
        store.room_ask(sku=sku, buyer=buyer, address="", join=False)
        trips.append((time.perf_counter() - started) * 1000)
    return (cpu_after - cpu) / len(buyers) * 1e6, trips


def asks_http(config: StackConfig, sku: str, count: int) -> tuple[list[float], int]:
    """Latencies (ms) of ``count`` new buyers asking through nginx, 16 at a time, and
    how many took a place."""
    tokens = (buyer_tokens(config, prefix="bench-room-million-", count=count, hours=1)
              if config.buyer_auth else None)
    names = list(tokens) if tokens else [f"http-{n}" for n in range(count)]
    local = threading.local()

    def ask(buyer: str) -> tuple[float, bool]:
        if not hasattr(local, "client"):
            local.client = FlashsaleClient(config.base_url, tokens=tokens)
        started = time.perf_counter()
        response = local.client.room(sku, buyer)
        took = response.status_code == 200 and response.json().get("state") == "waiting"
        return (time.perf_counter() - started) * 1000, took

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(ask, names))
    return [ms for ms, _ in answers], sum(took for _, took in answers)


def admissions(sku: str, seconds: float) -> float:
    """Admissions a second once the sale opens, the room asked every 5 ms."""
    # Opened now, on the room's clock (Redis's): its credit starts at nothing, rather
    # than at the second's worth a room keeps for an ask that comes late.
    seconds_now, micros = gate_redis().time()
    now_ms = seconds_now * 1000 + micros // 1000
    gate_redis().hset(store.room_keys(sku)["room"], mapping={"opens": now_ms, "credit": 0, "at": now_ms})
    admitted = store.room_counts(sku=sku).admitted
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < seconds:
        store.room_ask(sku=sku, buyer=f"w{n}", address="", join=False)
        n += 1
        time.sleep(0.005)
    return (store.room_counts(sku=sku).admitted - admitted) / (time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--places", type=int, default=1_000_000)
    parser.add_argument("--http", type=int, default=4000, help="new places asked for through nginx")
    parser.add_argument("--rate", type=int, default=1000, help="the room's admissions a second")
    parser.add_argument("--seconds", type=float, default=10, help="how long the admissions are counted")
    parser.add_argument("--docs", action="store_true",
                        help="also write the table to docs/results/measured/room-million.md")
    args = parser.parse_args(argv)
    config = StackConfig.from_env()
    command = "python -m benchmarks.room_million " + shlex.join(argv if argv is not None else sys.argv[1:])
    sku = f"bench-room-million-{os.getpid()}"
    # Admissions run a minute each: room for every one the count admits.
    active = int(args.rate * (args.seconds + 5))
    FlashsaleClient.for_stack(config).reset(sku, 1_000_000, strategy="gate", starts_in=DAY_S,
                                            room_rate=args.rate, room_active=active)
    room = store.room_keys(sku)["room"]
    gate_redis().hset(room, mapping={"per_address": 0, "abandon_ms": 3_600_000})
    try:
        print(f"filling the room with {args.places:,} places ...", flush=True)
        per_place, cpu_place, rate_filled = fill(sku, args.places)
        cpu_ask, trips = asks_waiting(sku, args.places, 20_000)
        http, took = asks_http(config, sku, args.http)
        waiting = store.room_counts(sku=sku).waiting
        admitted_rate = admissions(sku, args.seconds)
    finally:
        store.room_drop(sku=sku)
    with recorded("room-million", command, write=args.docs):
        print(f"One sale's waiting room (the gate's Redis, appendfsync always) filled with {args.places:,} "
              f"places through the room's store, then {args.http:,} more asked for through nginx and the "
              f"apps ({took:,} taken); {waiting:,} waiting when the sale opened. Admissions at "
              f"{args.rate:,} a second, counted for {args.seconds:g} s.\n")
        print("| figure | measured |")
        print("|---|---:|")
        print(f"| Redis memory a place | {per_place:,.0f} bytes |")
        print(f"| so a million places | {per_place * 1e6 / 2**20:,.0f} MiB |")
        print(f"| Redis CPU a place (asks sent {BATCH:,} a round trip) | {cpu_place:,.1f} µs |")
        print(f"| places taken a second, one client | {rate_filled:,.0f} |")
        print(f"| Redis CPU an ask by a buyer waiting, {args.places:,} in the queue | {cpu_ask:,.1f} µs |")
        print(f"| an ask's round trip through the store, p50 / p99 | {statistics.median(trips):.2f} / "
              f"{percentile(trips, 99):.2f} ms |")
        print(f"| an ask through nginx and an app, 16 at once, p50 / p99 | {statistics.median(http):.1f} / "
              f"{percentile(http, 99):.1f} ms |")
        print(f"| admissions a second, at a rate of {args.rate:,} | {admitted_rate:,.0f} "
              f"({admitted_rate / args.rate:.2f} of the rate) |")
        every = asks_a_second(args.places, args.rate)
        fixed = args.places * 1000 / store.ASK_LEAST_MS  # every one at the least interval
        print(f"\nWhat one room sustains: one core of its Redis answers {1e6 / cpu_ask:,.0f} asks a second "
              f"by waiting buyers, and a sale's room is one key set on one shard (its hash tag). Each "
              f"waiting buyer is told to ask again after a quarter of its wait, from "
              f"{store.ASK_LEAST_MS / 1000:g} s to {store.ASK_MOST_MS / 1000:g} s "
              f"(`waitingroom.store.ask_interval_ms`): {args.places:,} waiting at {args.rate:,} admissions "
              f"a second ask {every:,.0f} times a second, {every * cpu_ask / 1e6:.0%} of that core; every "
              f"{store.ASK_LEAST_MS / 1000:g} s each, they would ask {fixed:,.0f} times, "
              f"{fixed * cpu_ask / 1e6:.1f} cores' worth.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
