"""What the metrics cost: the same wrk rows with the apps counting and timing for
``/metrics`` and without (``FLASHSALE_METRICS=false``), in alternating runs.

    python -m benchmarks.metrics_cost [--rounds 3] [--seconds 5] [--docs]
    (make bench-metrics: installs wrk, starts the stack, runs this)

Each round restarts the apps with metrics on, then off (the next round off, then
on: neither always runs first), and runs, after 2 s of warm-up:

- ``ping``: ``GET /api/ping``, which no metric of the purchase touches: the
  machine's drift between the two runs of a round;
- ``gate, hot``: every request buys one product under the gate (counted, timed);
- ``atomic, spread``: every request buys, over 50 products under ``atomic``
  (counted, timed; the lockless strategies take no lock to measure);
- ``setnx, spread``: the same under a Redis lock (its acquisition counted, its wait
  and hold timed too).

The cost of a row is 1 − (answers/s with metrics ÷ without) per round, reported as
the median over the rounds beside the ping's, and gunicorn's CPU per answer
(``benchmarks.cpu``). The machine's cores are shared by every process and the load
client: a difference within the ping's spread is the machine's. The stack is put
back as it was.
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
from .gate import STOCK, Run, written, wrk

SPREAD = 50
ROWS = ("ping", "gate, hot", "atomic, spread", "setnx, spread")


def _round(config: StackConfig, admin: FlashsaleClient, meter: CpuMeter, args, tag: str) -> dict[str, Run]:
    """Every row once, against the apps as they run now; ``tag`` keeps its products apart."""
    base = config.base_url + "/"
    timing = dict(seconds=args.seconds, connections=args.connections, meter=meter)
    warm = dict(seconds=2, connections=args.connections, meter=meter)
    runs = {}
    wrk("warm-up", config.base_url + "/api/ping", **warm)
    runs["ping"] = wrk("ping", config.base_url + "/api/ping", **timing)
    sku = f"bench-metrics-gate-{tag}-0"
    admin.reset(sku, STOCK, strategy="gate")
    wrk("warm-up", base, sku=sku, **warm)
    runs["gate, hot"] = wrk("gate, hot", base, sku=sku, **timing)
    written(admin, sku, args.seconds)  # the persisters done before the next row shares the cores
    for strategy in ("atomic", "setnx"):
        prefix = f"bench-metrics-{strategy}-{tag}-"
        for i in range(SPREAD):
            admin.reset(f"{prefix}{i}", STOCK, strategy=strategy)
        wrk("warm-up", base, sku=f"{prefix}0", skus=SPREAD, **warm)
        label = f"{strategy}, spread"
        runs[label] = wrk(label, base, sku=f"{prefix}0", skus=SPREAD, **timing)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/metrics-cost.md, for the docs")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        parser.error("wrk is not installed (make bench-metrics installs it)")
    command = "python -m benchmarks.metrics_cost " + shlex.join(sys.argv[1:] if argv is None else argv)
    config = StackConfig.from_env()
    admin = FlashsaleClient.for_stack(config)
    meter = CpuMeter(Supervisor(config))
    rounds: list[dict[bool, dict[str, Run]]] = []
    with apps_as_needed(config) as use:
        for n in range(args.rounds):
            order = (True, False) if n % 2 == 0 else (False, True)
            runs = {}
            for metrics in order:
                use(metrics=metrics)
                runs[metrics] = _round(config, admin, meter, args, tag=f"{n}-{'on' if metrics else 'off'}")
            rounds.append(runs)
    with recorded("metrics-cost", command, write=args.docs):
        _report(command, args, config, rounds)
    return 0


def _report(command: str, args, config: StackConfig, rounds: list[dict[bool, dict[str, Run]]]) -> None:
    print(f"`{command}`: wrk -t2 -c{args.connections}, {args.seconds:g} s per row, against nginx on "
          f"127.0.0.1 ({config.instances} instances x {config.workers} workers x {config.threads} threads, "
          f"{os.cpu_count()} cores shared by all); {len(rounds)} rounds, metrics on and off alternately\n")
    print("| row | answers/s on / off | cost in answers/s, each round | median | cost in gunicorn CPU "
          "an answer, each round | median | p99 ms on / off |")
    print("|---|---|---|---:|---|---:|---|")
    for row in ROWS:
        on = [r[True][row] for r in rounds]
        off = [r[False][row] for r in rounds]
        # Answers/s as a share of the run's own ping: the machine's drift from one run
        # to the next moves both.
        rate = [1 - (r[True][row].requests_per_s / r[True]["ping"].requests_per_s)
                / (r[False][row].requests_per_s / r[False]["ping"].requests_per_s) for r in rounds]
        cpu = [r[True][row].cpu_us["gunicorn"] / r[False][row].cpu_us["gunicorn"] - 1 for r in rounds]

        def median(runs, figure):
            return statistics.median(figure(run) for run in runs)

        print(f"| {row} | {median(on, lambda r: r.requests_per_s):,.0f} / "
              f"{median(off, lambda r: r.requests_per_s):,.0f} "
              f"| {', '.join(f'{c:+.1%}' for c in rate)} | **{statistics.median(rate):+.1%}** "
              f"| {', '.join(f'{c:+.1%}' for c in cpu)} | **{statistics.median(cpu):+.1%}** "
              f"| {median(on, lambda r: r.p99_ms):.0f} / {median(off, lambda r: r.p99_ms):.0f} |")
    print("\nCosts are what metrics on takes over off, in one round: answers/s (each as a share of "
          "its run's ping, so the machine's drift between the two runs cancels; the ping row's are "
          "then 0) and gunicorn's CPU an answer (`benchmarks.cpu`). The ping row touches no metric: "
          "its CPU costs are the machine's noise.")


if __name__ == "__main__":
    sys.exit(main())
