"""One Redis's ceiling for the gate's sale script (``orders/gate/lua/sell.lua``):
Redis's CPU a script with each script in a round trip of its own, and with the
scripts of the purchases a process serves at once sent together
(``orders/gate/pipeline.py``, ``FLASHSALE_GATE_PIPELINE``).

    python -m benchmarks.gate_script [--seconds 4] [--rounds 2] [--processes 2] [--threads 16]
        [--appendfsync always] [--docs]

Redis runs commands on one thread, so the CPU it spends on each script bounds what
one Redis, or one shard of a Redis Cluster, sells a second on one hot product,
however many app processes feed it. A Redis of its own (append-only, fsynced before
each reply as the gate's is, or ``--appendfsync everysec``) holds one sale;
``--processes`` client processes of ``--threads`` threads each buy from it, every
purchase with a key of its own, the two ways alternating over ``--rounds``.
Reported, medians: scripts a second here (bounded by this machine's clients too, on
the same cores), Redis's CPU µs a script (``INFO``'s ``used_cpu_*`` over the scripts
it ran), the ceiling that implies (a second of one core over it), and the batches'
mean size.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shlex
import statistics
import sys
import threading
import time
import uuid

import redis

from common.gateredis import IdentifiedConnection
from loadtest.measured import recorded
from orders.gate.pipeline import ScriptPipeline
from orders.gate.store import GROUP, SELL, gate_keys, lua_source
from stack.scratch import start_redis

SKU = "gate-script-bench"
STOCK = 100_000_000  # more than any run sells: every script accepts
WAYS = ("alone", "together")


def _buyers(port: int, way: str, threads: int, seconds: float, results) -> None:
    """One client process: ``threads`` buyers for ``seconds``; puts (scripts, batches)."""
    keys = list(gate_keys(SKU))  # a purchase without an admission sends no room keys
    source = SELL
    batches: list[int] = []
    # The apps' connection class: each learns its server's run id, which the script checks.
    shared = redis.Redis(connection_pool=redis.ConnectionPool(
        port=port, socket_timeout=5, decode_responses=True, connection_class=IdentifiedConnection))
    pipeline = ScriptPipeline(shared.register_script(source), sent=batches.append)
    server = shared.info("server")["run_id"]
    done = [0] * threads
    stop = time.monotonic() + seconds

    def buyer(n: int) -> None:
        own = redis.Redis(port=port, socket_timeout=5, decode_responses=True).register_script(source)
        tag = uuid.uuid4().hex[:8]
        while time.monotonic() < stop:
            args = [f"{tag}-{n}-{done[n]}", "fp", 1, f"u{n}", "bench", 0, "1", "0", "", uuid.uuid4().hex]
            # Alone, the server's run id is the last argument, as the pipeline adds it.
            if way == "together":
                reply = pipeline.run(keys, args).value
            else:
                reply = own(keys=keys, args=[*args, server])
            assert reply[0] == "accepted", reply
            done[n] += 1

    workers = [threading.Thread(target=buyer, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    results.put((sum(done), len(batches) if way == "together" else sum(done)))


def measure(port: int, way: str, args) -> dict[str, float]:
    """One run of ``way``: scripts/s, Redis's CPU µs a script, the batches' mean."""
    control = redis.Redis(port=port, decode_responses=True)
    before = control.info("cpu")
    results = multiprocessing.get_context("fork").Queue()
    clients = [multiprocessing.get_context("fork").Process(
        target=_buyers, args=(port, way, args.threads, args.seconds, results)) for _ in range(args.processes)]
    for client in clients:
        client.start()
    outcomes = [results.get(timeout=args.seconds + 60) for _ in clients]
    for client in clients:
        client.join()
    after = control.info("cpu")
    cpu = sum(after[k] - before[k] for k in ("used_cpu_user", "used_cpu_sys"))
    scripts = sum(n for n, _ in outcomes)
    # Each client's buyers stop ``seconds`` after it started them.
    return {"rate": scripts / args.seconds, "cpu_us": cpu * 1e6 / scripts,
            "batch": scripts / sum(b for _, b in outcomes)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--processes", type=int, default=2, help="client processes (an app's workers)")
    parser.add_argument("--threads", type=int, default=16, help="buyers in each (its threads)")
    parser.add_argument("--appendfsync", choices=("always", "everysec"), default="always",
                        help="the AOF's fsync policy (the gate's Redis: always)")
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/gate-script.md, for the docs")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.gate_script " + shlex.join(sys.argv[1:] if argv is None else argv)
    runs = alternating_runs(args)
    with recorded("gate-script", command, write=args.docs):
        _report(command, args, runs)
    return 0


def alternating_runs(args) -> dict[str, list[dict[str, float]]]:
    """Each way's runs (``measure``), ``args.rounds`` of each, alternating, on a Redis
    of their own."""
    server = start_redis("--appendonly", "yes", "--appendfsync", args.appendfsync)
    try:
        client = server.client(decode_responses=True)
        client.register_script(lua_source("open"))(keys=list(gate_keys(SKU)), args=[
            STOCK, 1 << 25, int(time.time()), 1, GROUP, "", ""])
        runs: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
        for n in range(args.rounds):
            for way in WAYS if n % 2 == 0 else WAYS[::-1]:
                runs[way].append(measure(server.port, way, args))
    finally:
        server.stop()
    return runs


def _report(command: str, args, runs: dict[str, list[dict[str, float]]]) -> None:
    print(f"`{command}`: {args.processes} client processes × {args.threads} threads buying one hot product "
          f"from a Redis of its own (AOF, appendfsync {args.appendfsync}), {args.seconds:g} s a run, "
          f"{args.rounds} runs each way, alternating; medians\n")
    print("| the scripts | scripts/s here | Redis's CPU µs a script | one Redis's ceiling, scripts/s "
          "| scripts a batch |\n|---|---:|---:|---:|---:|")
    for way in WAYS:
        rate, cpu, batch = (statistics.median(run[figure] for run in runs[way])
                            for figure in ("rate", "cpu_us", "batch"))
        name = "each alone" if way == "alone" else "sent together"
        print(f"| {name} | {rate:,.0f} | {cpu:.1f} | {1e6 / cpu:,.0f} | {batch:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
