"""Verdicts from histories: sales recorded operation by operation, checked for
linearizability (``verdicts.checker``), under faults.

    python -m verdicts                                  # the matrix: every strategy, its nemeses
    python -m verdicts run --strategies none,atomic --nemeses calm,pause-app
    python -m verdicts run --small                      # stock 30, 240 buyers: what the tests run
    python -m verdicts check history.jsonl [--svg window.svg]   # a history of your own

``run`` uses the local stack (`make verdicts` starts it), its app instances
restarted once with the cells' critical-section delay, each cell's sale reset to its
strategy; it writes reports/<time>/verdicts/ (verdicts.md, index.html
with the timelines, one history per cell) and exits 1 if a strategy that claims
correctness is found not linearizable or breaks a set check (the gate losing its
sale with Redis's data is reported, as its design says it may). ``check`` prints the
verdict of one history file (format: ``common.history``) and exits 1 if it is not
linearizable.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from chaos.sale import RETRY_POLICY
from common.history import HistoryError, read
from common.strategies import STRATEGIES
from loadtest.measured import recorded
from stack.config import ROOT, StackConfig
from stack.control import apps_as_needed
from stack.hosted import HostedApps

from .checker import check
from .matrix import (
    EXPIRY_PAUSE_MS,
    NEMESES,
    Cell,
    default_plan,
    hosted,
    hosts_for,
    html,
    in_zookeeper,
    run_cell,
    table,
)
from .timeline import svg


def _check(args: argparse.Namespace) -> int:
    try:
        events = read(Path(args.history))
    except (OSError, HistoryError) as e:
        print(f"{args.history}: {e}", file=sys.stderr)
        return 2
    verdict = check(events, budget_states=args.budget)
    for sku in verdict.skus:
        state = {True: "linearizable", False: "NOT linearizable", None: "unknown (search budget spent)"}
        paid = f", {sku.payments} payments" if sku.payments else ""
        print(f"{sku.sku}: {state[sku.linearizable]}; {sku.operations} purchases, {sku.ok} ok, "
              f"{sku.unknown} unknown{paid}; {sku.searched} states searched in {sku.seconds:.2f} s")
        for anomaly in sku.anomalies:
            print(f"  {anomaly.kind}: {anomaly.detail}")
            for op in anomaly.ops[:12]:
                print(f"    {op.describe()}")
        if sku.window is not None and args.svg:
            Path(args.svg).write_text(svg(sku.window, title=f"{args.history}: {sku.sku}"))
            print(f"  window drawn: {args.svg}")
    return 0 if verdict.valid else 1


def _run(args: argparse.Namespace, command: str) -> int:
    if args.small:
        args.stock, args.buyers, args.threads, args.trigger = 30, 240, 12, 10
    strategies = [s for s in args.strategies.split(",") if s]
    nemeses = [n for n in (args.nemeses or "").split(",") if n]
    unknown = [s for s in strategies if s not in STRATEGIES] + [n for n in nemeses if n not in NEMESES]
    if unknown:
        print(f"unknown: {', '.join(unknown)} (nemeses: {', '.join(NEMESES)})", file=sys.stderr)
        return 2
    plan = ([(s, n) for s in strategies for n in nemeses] if args.nemeses
            else default_plan(strategies))
    config = StackConfig.from_env()
    out = ROOT / "reports" / datetime.now(UTC).strftime("%Y%m%d-%H%M%S") / "verdicts"
    out.mkdir(parents=True, exist_ok=True)
    print(f"$ {command}", flush=True)
    started = time.monotonic()
    cells: list[Cell] = []
    with apps_as_needed(config) as use, contextlib.ExitStack() as hosts:
        on: dict[tuple, HostedApps] = {}  # started as the first cell needs them
        # One set of hosts serves each shape's cells, whatever their strategy.
        zookeeper = any(in_zookeeper(STRATEGIES[s]) for s, n in plan if hosted(n))
        gate = any(STRATEGIES[s].gated for s, n in plan if hosted(n))
        for strategy, nemesis in plan:
            # A stack cell's sale is its strategy's by its reset: the instances as
            # they run sell every strategy (chaos.sale), with the cells' delay.
            current = (config if hosted(nemesis)
                       else use(section_delay_ms=args.section_delay_ms, expiry_pause_ms=EXPIRY_PAUSE_MS))
            where = " (test hosts)" if hosted(nemesis) else ""
            print(f"[verdicts] {strategy} x {nemesis}{where}", flush=True)
            instances = None
            if hosted(nemesis):
                shape = hosts_for(nemesis, args.section_delay_ms) | {"zookeeper": zookeeper, "gate": gate}
                key = tuple(shape.items())
                if key not in on:
                    on[key] = hosts.enter_context(HostedApps(config, **shape))
                instances = on[key]
            cell = run_cell(current, strategy=strategy, nemesis=nemesis, out=out, stock=args.stock,
                            buyers=args.buyers, threads=args.threads, trigger=args.trigger, on=instances)
            cells.append(cell)
            print(f"[verdicts]   linearizable: {cell.said}; {cell.operations} operations, "
                  f"{cell.unknown} unknown, availability {cell.availability:.0%}", flush=True)
    heading = (f"`{command}`, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC: stock {args.stock}, {args.buyers} "
               f"buyers from {args.threads} threads retrying with their key ({RETRY_POLICY}), the nemesis "
               f"striking at order {args.trigger}, a critical-section delay of {args.section_delay_ms:g} ms; "
               f"{time.monotonic() - started:.0f} s in all.")
    (out / "verdicts.md").write_text(f"# Verdicts\n\n{heading}\n\n{table(cells)}\n")
    (out / "index.html").write_text(html(cells, heading=heading))
    with recorded("verdicts", command, write=args.docs):
        print(f"Stock {args.stock}, {args.buyers} buyers from {args.threads} threads retrying with their key "
              f"({RETRY_POLICY}); the nemesis strikes at order {args.trigger}; critical-section delay "
              f"{args.section_delay_ms:g} ms. {len(cells)} cells in {time.monotonic() - started:.0f} s."
              f"\n\n{table(cells)}")
    print(f"\nreport: {out / 'index.html'}")
    broken = [c for c in cells if c.verdict.valid is not True and STRATEGIES[c.strategy].claims_correct
              and not c.as_designed]
    if broken:
        print("BROKEN: " + "; ".join(f"{c.strategy} x {c.nemesis}" for c in broken))
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m verdicts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="the matrix against the local stack")
    run.add_argument("--strategies", default=",".join(STRATEGIES), help="comma-separated (default: all)")
    run.add_argument("--nemeses", help=f"comma-separated, of: {', '.join(NEMESES)}, for every strategy "
                     "(default: calm for each; for those that claim correctness, every fault that "
                     "strikes what they use)")
    run.add_argument("--stock", type=int, default=60)
    run.add_argument("--buyers", type=int, default=400)
    run.add_argument("--threads", type=int, default=16)
    run.add_argument("--trigger", type=int, default=15, help="the nemesis strikes at this order")
    run.add_argument("--section-delay-ms", type=float, default=2.0,
                     help="a pause inside the critical section, for every strategy (widens the race)")
    run.add_argument("--small", action="store_true", help="stock 30, 240 buyers, 12 threads, trigger 10")
    run.add_argument("--docs", action="store_true", help="also write the table to docs/results/measured/")
    one = sub.add_parser("check", help="check one history file")
    one.add_argument("history")
    one.add_argument("--svg", help="draw the window where no order gets past into this file")
    one.add_argument("--budget", type=int, default=2_000_000, help="states the search may cache")
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["run", *argv]
    args = parser.parse_args(argv)
    if args.command == "check":
        return _check(args)
    return _run(args, "python -m verdicts " + shlex.join(argv))


if __name__ == "__main__":
    sys.exit(main())
