"""What taking the buyer from a bearer token costs a purchase: the apps with
``FLASHSALE_BUYER_AUTH`` on (each purchase carries a buyer's token, checked in the
purchase's shortcut) and off (the body names the buyer), in alternating runs.

    python -m benchmarks.buyers_cost [--rounds 3] [--wrk-rounds 2] [--seconds 6] [--docs]
    (make bench-buyers: installs wrk, starts the stack, runs this)

Two measures, as ``benchmarks.metrics_cost`` takes them (the machine's cores are
shared by every process of the stack and the load client):

1. **In-process** (``benchmarks.purchase_cpu``, ``--rounds`` runs): the app's CPU a
   purchase without and with a token, on the gate's hot product and on ``atomic``
   over 50 products, the two rows of each pair measured one after the other. 1,000
   buyers take turns, so a process has checked each token's signature before most
   of its purchases (it keeps the tokens it checked, as for a buyer's retries).
2. **Under load** (wrk against nginx, ``--wrk-rounds`` times each way, the apps
   restarted between): answers/s and the apps' CPU an answer; with the setting on,
   each request carries the token of the next of 1,000 buyers (``manage.py
   buyers_make``).

The cost of a row: the µs a token adds (1), over the apps' CPU an answer under load
without one (2). The stack is put back as it was.
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

from loadtest.buyers import buyers_file
from loadtest.client import FlashsaleClient
from loadtest.measured import recorded
from stack.config import StackConfig
from stack.control import apps_as_needed
from stack.supervisor import Supervisor

from .cpu import CpuMeter
from .cpu import in_process as app_cpu
from .gate import STOCK, Run, warm_up, written, wrk
from .metrics_cost import alternating, load_table, parsed

SPREAD = 50
BUYERS = 1000
# (in-process row without a token, with one, the wrk row beside them)
ROWS = [("gate", "gate, signed in", "gate, hot"),
        ("atomic, spread", "atomic, spread, signed in", "atomic, spread")]


def under_load(config: StackConfig, admin: FlashsaleClient, meter: CpuMeter, args, tag: str,
               tokens: Path | None) -> dict[str, Run]:
    """The wrk rows once, against the apps as they run now."""
    base = config.base_url + "/"
    timing = dict(seconds=args.seconds, connections=args.connections, meter=meter, tokens=tokens)
    runs = {}
    sku = f"bench-buyers-gate-{tag}-0"
    admin.reset(sku, STOCK, strategy="gate")
    warm_up(args, base, sku=sku, **timing)
    runs["gate, hot"] = wrk("gate, hot", base, sku=sku, **timing)
    written(admin, sku, args.seconds)  # the persisters done before the next row shares the cores
    prefix = f"bench-buyers-atomic-{tag}-"
    for i in range(SPREAD):
        admin.reset(f"{prefix}{i}", STOCK, strategy="atomic")
    warm_up(args, base, sku=f"{prefix}0", skus=SPREAD, **timing)
    runs["atomic, spread"] = wrk("atomic, spread", base, sku=f"{prefix}0", skus=SPREAD, **timing)
    return runs


def main(argv: list[str] | None = None) -> int:
    args = parsed(argv, doc=__doc__, rounds="in-process runs", measured="buyers-cost", target="bench-buyers")
    command = "python -m benchmarks.buyers_cost " + shlex.join(sys.argv[1:] if argv is None else argv)
    config = StackConfig.from_env()

    cpu = [app_cpu(args.requests) for _ in range(args.rounds)]

    loads: dict[bool, list[dict[str, Run]]] = {True: [], False: []}
    if args.wrk_rounds:
        admin = FlashsaleClient.for_stack(config)
        meter = CpuMeter(Supervisor(config))
        with tempfile.TemporaryDirectory(prefix="flashsale-bench-buyers-") as scratch, \
                apps_as_needed(config) as use:
            tokens = buyers_file(config, Path(scratch) / "buyers.tsv", prefix="bench-buyer-", count=BUYERS)
            for n, signed_in in enumerate(alternating(args.wrk_rounds)):
                use(buyer_auth=signed_in)
                loads[signed_in].append(under_load(config, admin, meter, args, tag=f"{n}-{signed_in}",
                                                   tokens=tokens if signed_in else None))

    with recorded("buyers-cost", command, write=args.docs):
        _report(command, args, config, cpu, loads)
    return 0


def _report(command: str, args, config: StackConfig, cpu: list, loads: dict) -> None:
    def median(runs: list, row: str, figure=lambda value: value) -> float:
        return statistics.median(figure(run[row]) for run in runs)

    print(f"`{command}` ({os.cpu_count()} cores shared by every process and the load client)\n")
    print(f"In-process (`benchmarks.purchase_cpu --requests {args.requests}`, {args.rounds} runs, each "
          "pair of rows one after the other): the app's CPU a purchase, µs, medians\n")
    print("| row | with a token | without | added | each run, with − without |\n|---|---:|---:|---:|---|")
    added = {}
    for without, with_token, loaded in ROWS:
        on, off = median(cpu, with_token), median(cpu, without)
        added[loaded] = on - off
        pairs = ", ".join(f"{run[with_token] - run[without]:+.0f}" for run in cpu)
        print(f"| {without} | {on:,.0f} | {off:,.0f} | **{on - off:+.0f}** | {pairs} |")
    if not loads[True]:
        return
    load_table(config, args, loads, added)
    print("\nThe answers/s and CPU columns under load move by a tenth between two runs of the same "
          "configuration on this machine; the in-process difference is the token's own.")


if __name__ == "__main__":
    sys.exit(main())
