"""What a waiting room costs the purchase, on the gate's hot product: what checking a
buyer's admission adds to a purchase, against the CPU an answer.

    python -m benchmarks.room_cost [--rounds 6] [--requests 3000] [--wrk-rounds 2]
                                   [--seconds 6] [--connections 64] [--docs]
    (make bench-room: installs wrk, starts the stack, runs this)

Two measures, as ``benchmarks.buyers_cost`` takes them (the machine's cores are
shared by every process of the stack and the load client):

1. **In-process** (``benchmarks.purchase_cpu``, ``--rounds`` runs, the pair of rows
   one after the other, which first alternating from run to run: a process's first
   rows pay for what it warms): the app's CPU a purchase without a room and with one,
   each purchase by a buyer the room admitted (untimed, before the row) carrying its
   admission, which the purchase checks and the gate's script spends.
2. **Under load** (wrk against nginx, ``--wrk-rounds`` runs, no room): the apps' CPU
   an answer of the gate's hot purchase, each by the next of 1,000 signed-in buyers.

The room's cost: the µs it adds (1), over the apps' CPU an answer under load (2),
which also pays the request server's share of each request. Writes products
``cpu-*`` and ``bench-room-*`` to the stack's database.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import sys

from loadtest.client import FlashsaleClient
from loadtest.measured import recorded
from stack.config import StackConfig
from stack.supervisor import Supervisor

from .cpu import CpuMeter, alternated, paired
from .cpu import in_process as app_cpu
from .gate import STOCK, Run, add_warm_up, warm_up, written, wrk, wrk_buyers

ROWS = [("gate", "gate, waiting room")]


def under_load(config: StackConfig, args) -> list[Run]:
    """The gate's hot purchase under wrk, ``args.wrk_rounds`` times, each on a new sale."""
    admin, meter = FlashsaleClient.for_stack(config), CpuMeter(Supervisor(config))
    base, tokens = config.base_url + "/", wrk_buyers(config)
    runs = []
    for n in range(args.wrk_rounds):
        sku = f"bench-room-gate-{os.getpid()}-{n}-0"
        admin.reset(sku, STOCK, strategy="gate")
        warm_up(args, base, sku=sku, seconds=args.seconds, connections=args.connections,
            meter=meter, tokens=tokens)
        runs.append(wrk("gate, hot", base, sku=sku, seconds=args.seconds, connections=args.connections,
                        meter=meter, tokens=tokens))
        written(admin, sku, args.seconds)  # the persisters done before the next run shares the cores
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6, help="in-process runs of the purchase rows")
    parser.add_argument("--requests", type=int, default=3000, help="per in-process row")
    parser.add_argument("--wrk-rounds", type=int, default=2, help="wrk runs of the gate's hot row (0: none)")
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--connections", type=int, default=64)
    add_warm_up(parser)
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/room-cost.md, for the docs")
    args = parser.parse_args(argv)
    if args.wrk_rounds and shutil.which("wrk") is None:
        parser.error("wrk is not installed (make bench-room installs it)")
    command = "python -m benchmarks.room_cost " + shlex.join(sys.argv[1:] if argv is None else argv)
    config = StackConfig.from_env()

    cpu = [app_cpu(args.requests, rows=alternated(n, ROWS)) for n in range(args.rounds)]
    loaded = under_load(config, args) if args.wrk_rounds else []

    with recorded("room-cost", command, write=args.docs):
        print(f"`{command}` ({os.cpu_count()} cores shared by every process of the stack and the load "
              "client)\n")
        print(f"In-process (`benchmarks.purchase_cpu --requests {args.requests}`, {args.rounds} runs, the "
              "two rows one after the other, which first alternating): the app's CPU a purchase, µs, "
              "medians\n")
        print("| row | without a room | with one | added | with ÷ without | each run, with ÷ without |\n"
              "|---|---:|---:|---:|---:|---|")
        [pair] = paired(cpu, ROWS)
        off, on = pair.without, pair.with_it
        print(f"| {pair.row} | {off:,.0f} | {on:,.0f} | {on - off:+,.0f} | **{on / off:.2f}** | "
              f"{pair.each} |")
        if loaded:
            apps = statistics.median(run.cpu_us["apps"] for run in loaded)
            stack = statistics.median(sum(run.cpu_us[role] for role in run.cpu_us if role != "wrk")
                                      for run in loaded)
            print(f"\nUnder load (wrk -t2 -c{args.connections}, {args.seconds:g} s a run, against nginx: "
                  f"{config.instances} instances x {config.workers} workers x {config.threads} threads; "
                  f"{len(loaded)} runs, no room), medians:\n")
            print("| row | answers/s | the apps' CPU µs an answer | the stack's | **cost**: µs added ÷ the "
                  "apps' CPU an answer |\n|---|---:|---:|---:|---:|")
            answers = statistics.median(run.requests_per_s for run in loaded)
            print(f"| gate, hot | {answers:,.0f} | {apps:,.0f} | {stack:,.0f} | "
                  f"**{(on - off) / apps:+.1%}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
