"""What a waiting room costs the purchase: the app's CPU a purchase of the gate's hot
product without a room and with one (each purchase carrying its buyer's admission,
which the purchase checks, a JWT, and spends, one script in Redis), in-process.

    python -m benchmarks.room_cost [--rounds 6] [--requests 3000] [--docs]
    (make bench-room: starts the stack, runs this)

``--rounds`` runs of ``benchmarks.purchase_cpu``, each with the pair of rows one after
the other, which first alternating from run to run (a process's first rows pay for
what it warms). The buyers are admitted before each row, untimed. Writes products
``cpu-*`` to the stack's database.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from loadtest.measured import recorded

from .cpu import alternated, paired
from .cpu import in_process as app_cpu

ROWS = [("gate", "gate, waiting room")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6, help="in-process runs of the purchase rows")
    parser.add_argument("--requests", type=int, default=3000, help="per in-process row")
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/room-cost.md, for the docs")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.room_cost " + shlex.join(sys.argv[1:] if argv is None else argv)

    cpu = [app_cpu(args.requests, rows=alternated(n, ROWS)) for n in range(args.rounds)]

    with recorded("room-cost", command, write=args.docs):
        print(f"`{command}` ({os.cpu_count()} cores shared by every process of the stack)\n")
        print(f"The purchase, in-process (`benchmarks.purchase_cpu --requests {args.requests}`, "
              f"{args.rounds} runs, the two rows one after the other, which first alternating): the "
              "app's CPU a purchase, µs, medians\n")
        print("| row | without a room | with one | added | with ÷ without | each run, with ÷ without |\n"
              "|---|---:|---:|---:|---:|---|")
        for pair in paired(cpu, ROWS):
            off, on = pair.without, pair.with_it
            print(f"| {pair.row} | {off:,.0f} | {on:,.0f} | {on - off:+,.0f} | **{on / off:.2f}** | "
                  f"{pair.each} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
