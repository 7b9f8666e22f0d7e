"""What the metrics cost: the apps with counting and timing for ``/metrics`` and
without (``FLASHSALE_METRICS=false``), in alternating runs of the same commands.

    python -m benchmarks.metrics_cost [--rounds 3] [--wrk-rounds 2] [--seconds 6] [--docs]
    (make bench-metrics: installs wrk, starts the stack, runs this)

Two measures, because the machine's cores are shared by every process of the stack
and the load client, and a whole-stack rate moves by a tenth from one minute to the
next on its own:

1. **In-process** (``benchmarks.purchase_cpu``, ``--rounds`` times each way, on then
   off, then off then on): the CPU the app's Python spends on a request, with and
   without metrics: ping, the gate (one hot product), ``atomic`` and ``setnx``
   (over 50 products). The difference is what the metrics add to a request, in µs.
2. **Under load** (wrk against nginx, ``--wrk-rounds`` times each way, the apps
   restarted between): answers/s and the apps' CPU an answer (``benchmarks.cpu``),
   which also pays the HTTP parsing, the threads' switches and the round trips.

The cost of a row: the µs it adds (1), over the apps' CPU an answer under load
with metrics off (2). The stack is put back as it was.
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
from stack.control import apps_as_needed
from stack.supervisor import Supervisor

from .cpu import CpuMeter
from .cpu import in_process as app_cpu
from .gate import STOCK, Run, add_warm_up, warm_up, written, wrk, wrk_buyers

SPREAD = 50
# In-process rows (benchmarks.purchase_cpu) and the wrk rows they are measured beside.
ROWS = {"ping": "ping", "gate": "gate, hot", "atomic, spread": "atomic, spread",
        "setnx, spread": "setnx, spread"}


def in_process(metrics: bool, requests: int) -> dict[str, float]:
    """CPU µs a request, by row, from one run of benchmarks.purchase_cpu."""
    rows = app_cpu(requests, FLASHSALE_METRICS="true" if metrics else "false")
    return {row: rows[row] for row in ROWS}


def under_load(config: StackConfig, admin: FlashsaleClient, meter: CpuMeter, args,
               tag: str) -> dict[str, Run]:
    """Every wrk row once, against the apps as they run now; ``tag`` keeps its products apart."""
    base = config.base_url + "/"
    timing = dict(seconds=args.seconds, connections=args.connections, meter=meter, tokens=wrk_buyers(config))
    runs = {}
    warm_up(args, config.base_url + "/api/ping", **timing)
    runs["ping"] = wrk("ping", config.base_url + "/api/ping", **timing)
    sku = f"bench-metrics-gate-{tag}-0"
    admin.reset(sku, STOCK, strategy="gate")
    warm_up(args, base, sku=sku, **timing)
    runs["gate, hot"] = wrk("gate, hot", base, sku=sku, **timing)
    written(admin, sku, args.seconds)  # the persisters done before the next row shares the cores
    for strategy in ("atomic", "setnx"):
        prefix = f"bench-metrics-{strategy}-{tag}-"
        for i in range(SPREAD):
            admin.reset(f"{prefix}{i}", STOCK, strategy=strategy)
        warm_up(args, base, sku=f"{prefix}0", skus=SPREAD, **timing)
        label = f"{strategy}, spread"
        runs[label] = wrk(label, base, sku=f"{prefix}0", skus=SPREAD, **timing)
    return runs


def alternating(rounds: int) -> list[bool]:
    """on, off, then off, on, …: neither always runs first."""
    return [metrics for n in range(rounds) for metrics in ((True, False) if n % 2 == 0 else (False, True))]


def parsed(argv: list[str] | None, *, doc: str, rounds: str, measured: str,
           target: str) -> argparse.Namespace:
    """The arguments of a benchmark of a setting on and off (this one's and others'):
    in-process runs (``rounds`` says how), wrk runs each way, and where ``--docs``
    writes (``measured``); wrk must be installed (``make <target>`` does it)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help=rounds)
    parser.add_argument("--requests", type=int, default=3000, help="per in-process row")
    parser.add_argument("--wrk-rounds", type=int, default=2, help="wrk runs each way (0: none)")
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--connections", type=int, default=64)
    add_warm_up(parser)
    parser.add_argument("--docs", action="store_true",
                        help=f"also write the report to docs/results/measured/{measured}.md, for the docs")
    args = parser.parse_args(argv)
    if args.wrk_rounds and shutil.which("wrk") is None:
        parser.error(f"wrk is not installed (make {target} installs it)")
    return args


def load_table(config: StackConfig, args, loads: dict[bool, list[dict[str, Run]]],
               added: dict[str, float]) -> None:
    """The wrk rows on and off, medians, each row's cost: the µs the setting adds in
    process (``added``, by wrk row), over the apps' CPU an answer with it off."""
    def median(runs: list, row: str, figure) -> float:
        return statistics.median(figure(run[row]) for run in runs)

    print(f"\nUnder load (wrk -t2 -c{args.connections}, {args.seconds:g} s a row, against nginx: "
          f"{config.instances} instances x {config.workers} workers x {config.threads} threads; "
          f"{len(loads[True])} runs each way, the apps restarted between), medians:\n")
    print("| row | answers/s on / off | the apps' CPU µs an answer, on / off | p99 ms on / off "
          "| **cost**: µs added ÷ the apps' CPU an answer (off) |\n|---|---|---|---|---:|")
    for row, extra in added.items():
        apps_off = median(loads[False], row, lambda run: run.cpu_us["apps"])
        print(f"| {row} | {median(loads[True], row, lambda r: r.requests_per_s):,.0f} / "
              f"{median(loads[False], row, lambda r: r.requests_per_s):,.0f} "
              f"| {median(loads[True], row, lambda r: r.cpu_us['apps']):,.0f} / {apps_off:,.0f} "
              f"| {median(loads[True], row, lambda r: r.p99_ms):.0f} / "
              f"{median(loads[False], row, lambda r: r.p99_ms):.0f} "
              f"| **{extra / apps_off:+.1%}** |")


def main(argv: list[str] | None = None) -> int:
    args = parsed(argv, doc=__doc__, rounds="in-process runs each way", measured="metrics-cost",
                  target="bench-metrics")
    command = "python -m benchmarks.metrics_cost " + shlex.join(sys.argv[1:] if argv is None else argv)
    config = StackConfig.from_env()

    cpu: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for metrics in alternating(args.rounds):
        cpu[metrics].append(in_process(metrics, args.requests))

    loads: dict[bool, list[dict[str, Run]]] = {True: [], False: []}
    if args.wrk_rounds:
        admin = FlashsaleClient.for_stack(config)
        meter = CpuMeter(Supervisor(config))
        with apps_as_needed(config) as use:
            for n, metrics in enumerate(alternating(args.wrk_rounds)):
                use(metrics=metrics)
                loads[metrics].append(under_load(config, admin, meter, args, tag=f"{n}-{metrics}"))

    with recorded("metrics-cost", command, write=args.docs):
        _report(command, args, config, cpu, loads)
    return 0


def _report(command: str, args, config: StackConfig, cpu: dict, loads: dict) -> None:
    def median(runs: list, row: str, figure=lambda value: value) -> float:
        return statistics.median(figure(run[row]) for run in runs)

    print(f"`{command}` ({os.cpu_count()} cores shared by every process and the load client)\n")
    print(f"In-process (`benchmarks.purchase_cpu --requests {args.requests}`, {args.rounds} runs each way, "
          "alternating): the app's CPU a request, µs, medians\n")
    print("| row | metrics on | off | added | each run, on − off |\n|---|---:|---:|---:|---|")
    added = {}
    for row in ROWS:
        on, off = median(cpu[True], row), median(cpu[False], row)
        added[row] = on - off
        pairs = ", ".join(f"{a[row] - b[row]:+.0f}" for a, b in zip(cpu[True], cpu[False], strict=True))
        print(f"| {row} | {on:,.0f} | {off:,.0f} | **{on - off:+.0f}** | {pairs} |")
    if not loads[True]:
        return
    load_table(config, args, loads, {loaded: added[row] for row, loaded in ROWS.items()})
    print("\nThe answers/s and CPU columns under load move by a tenth between two runs of the same "
          "configuration on this machine (compare the ping row, which no metric touches); the "
          "in-process difference is the metrics' own.")


if __name__ == "__main__":
    sys.exit(main())
