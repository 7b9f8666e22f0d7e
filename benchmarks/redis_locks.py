"""Redis locks side by side, against the same Redis in one run:

    python -m benchmarks.redis_locks [--seconds 10] [--processes 4] [--threads 12] [--hold-ms 10]
    (make bench-redis-locks: installs the peers, starts the stack, runs this)

For each of ``setnx``, ``redisson`` and ``redisson-fair`` (this project), redis-py's
``Lock`` and python-redis-lock (peers, installed for the benchmark only, each with its
own defaults):

- uncontended: one thread, acquire + release in a loop for 2 s → per second;
- contended: processes × threads clients on one lock, each holding it for
  ``hold-ms`` then asking again, for ``seconds``: acquisitions in all, the fewest
  and most by one client (starvation), handoff latency p50/p99 (one holder's
  release to the next holder's acquire), and Redis commands per acquisition
  (INFO commandstats, script internals included) and round trips per acquisition
  (counted in the clients).

Figures depend on the machine and its load: compare them as ratios within a run.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import statistics
import sys
import threading
import time
import uuid
from dataclasses import dataclass

import redis

from loadtest.measured import recorded
from loadtest.round_trips import CountingConnection, client, round_trips
from locking.backends.redis.redisson import RedissonLockBackend
from locking.backends.redis.redisson_fair import RedissonFairLockBackend
from locking.backends.redis.setnx import SetnxLockBackend

BACKENDS = {"setnx": SetnxLockBackend, "redisson": RedissonLockBackend,
            "redisson-fair": RedissonFairLockBackend}
IMPLEMENTATIONS = (*BACKENDS, "redis-py Lock", "python-redis-lock")
WAITING = {
    "setnx": "polls every 20 ms",
    "redisson": "pub/sub: a release wakes one waiter in all (a listed process), which peeks (PTTL)",
    "redisson-fair": "a line; pub/sub naming the first in line",
    "redis-py Lock": "polls every 100 ms (its default)",
    "python-redis-lock": "BLPOP on a signal list",
}
def lock_factory(kind: str, url: str, name: str):
    """A function making a fresh lock object for ``name`` (one per client thread)."""
    if kind in BACKENDS:
        backend = BACKENDS[kind]("bench", {"url": url, "key_prefix": "bench:",
                                           "connection_class": CountingConnection})
        return lambda: backend.lock(name)
    shared = client(url)
    if kind == "redis-py Lock":
        return lambda: shared.lock(f"bench:{name}", timeout=30)
    if kind == "python-redis-lock":
        import redis_lock

        return lambda: redis_lock.Lock(shared, f"bench:{name}", expire=30)
    raise ValueError(kind)


def uncontended(kind: str, url: str, seconds: float = 2.0) -> float:
    make = lock_factory(kind, url, f"solo-{uuid.uuid4().hex[:6]}")
    lock = make()
    n, deadline = 0, time.monotonic() + seconds
    started = time.monotonic()
    while time.monotonic() < deadline:
        lock.acquire()
        lock.release()
        n += 1
    return n / (time.monotonic() - started)


def contend(kind: str, url: str, name: str, threads: int, hold: float, go, ready, start_at, seconds, out):
    """One process of the contended run: ``threads`` clients, each a list of
    (acquired, released) monotonic times."""
    make = lock_factory(kind, url, name)
    results: list[list[tuple[float, float]]] = [[] for _ in range(threads)]
    before = round_trips()

    def client_loop(i: int) -> None:
        lock = make()
        deadline = start_at.value + seconds
        while time.monotonic() < deadline:
            if not lock.acquire():
                continue
            acquired = time.monotonic()
            time.sleep(hold)
            released = time.monotonic()
            lock.release()
            results[i].append((acquired, released))

    workers = [threading.Thread(target=client_loop, args=(i,)) for i in range(threads)]
    ready.put(1)
    go.wait()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put((results, round_trips() - before))


@dataclass
class Row:
    kind: str
    uncontended_per_s: float
    acquisitions: int
    per_client_min: int
    per_client_max: int
    handoff_p50_ms: float
    handoff_p99_ms: float
    commands_per_acq: float
    round_trips_per_acq: float


# Commands that are not the locks': this run's own INFO, and the stack's persisters
# polling the gate's streams in the same Redis.
NOT_THE_LOCKS = ("info", "config", "xreadgroup", "xautoclaim", "smembers", "client")


def commands_executed(r: redis.Redis) -> int:
    stats = r.info("commandstats")
    return sum(v["calls"] for k, v in stats.items()
               if k.removeprefix("cmdstat_").split("|")[0] not in NOT_THE_LOCKS)


def contended(kind: str, url: str, processes: int, threads: int, hold: float, seconds: float) -> Row:
    ctx = multiprocessing.get_context("spawn")
    go, ready, out = ctx.Event(), ctx.Queue(), ctx.Queue()
    start_at = ctx.Value("d", 0.0)
    name = f"contended-{uuid.uuid4().hex[:6]}"
    procs = [ctx.Process(target=contend, args=(kind, url, name, threads, hold, go, ready, start_at,
                                               seconds, out)) for _ in range(processes)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=60)
    admin = redis.Redis.from_url(url)
    admin.config_resetstat()
    start_at.value = time.monotonic()
    go.set()
    gathered = [out.get(timeout=seconds + 60) for _ in procs]
    executed = commands_executed(admin)
    for p in procs:
        p.join()

    per_client = [c for results, _ in gathered for c in results]
    intervals = sorted(iv for c in per_client for iv in c)
    handoffs = [(nxt[0] - prev[1]) * 1000 for prev, nxt in itertools.pairwise(intervals)]
    total = len(intervals)
    cuts = statistics.quantiles(handoffs, n=100) if len(handoffs) >= 2 else [float("nan")] * 99
    return Row(
        kind=kind,
        uncontended_per_s=0.0,
        acquisitions=total,
        per_client_min=min(len(c) for c in per_client),
        per_client_max=max(len(c) for c in per_client),
        handoff_p50_ms=cuts[49],
        handoff_p99_ms=cuts[98],
        commands_per_acq=executed / max(total, 1),
        round_trips_per_acq=sum(rt for _, rt in gathered) / max(total, 1),
    )


def table(rows: list[Row]) -> str:
    lines = [
        "| lock | waiting | uncontended acq+rel/s | acquisitions | per client min–max "
        "| handoff p50 ms | handoff p99 ms | Redis commands / acq | round trips / acq |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.kind} | {WAITING[r.kind]} | {r.uncontended_per_s:,.0f} | {r.acquisitions:,} "
            f"| {r.per_client_min}–{r.per_client_max} | {r.handoff_p50_ms:.2f} | {r.handoff_p99_ms:.2f} "
            f"| {r.commands_per_acq:.1f} | {r.round_trips_per_acq:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=None, help="Redis URL (default: the stack's, database 3)")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=12)
    parser.add_argument("--hold-ms", type=float, default=10)
    parser.add_argument("--only", default=",".join(IMPLEMENTATIONS))
    parser.add_argument("--docs", action="store_true",
                        help="also write the table to docs/results/measured/redis-locks.md, for the docs")
    args = parser.parse_args(argv)
    if args.url is None:
        from stack.config import StackConfig

        args.url = f"redis://127.0.0.1:{StackConfig.from_env().redis_port}/3"
    kinds = [k.strip() for k in args.only.split(",")]
    clients = args.processes * args.threads
    print(f"Redis locks: {clients} clients ({args.processes} processes x {args.threads} threads), "
          f"{args.hold_ms:g} ms hold, {args.seconds:g} s each, Redis {args.url}", flush=True)
    rows = []
    for kind in kinds:
        print(f"  {kind}: uncontended...", end="", flush=True)
        solo = uncontended(kind, args.url)
        print(" contended...", end="", flush=True)
        row = contended(kind, args.url, args.processes, args.threads, args.hold_ms / 1000, args.seconds)
        row.uncontended_per_s = solo
        rows.append(row)
        print(f" {row.acquisitions} acquisitions", flush=True)
    print()
    given = " ".join(argv if argv is not None else sys.argv[1:])
    command = f"python -m benchmarks.redis_locks {given}".rstrip()
    print(f"command: {command}\n")
    with recorded("redis-locks", command, write=args.docs):
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
