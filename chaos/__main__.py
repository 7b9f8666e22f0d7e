"""Sales under faults: for each strategy and each fault, a sale with retrying buyers
(see ``chaos.sale``), the fault injected mid-sale, and the verdict.

    python -m chaos                              # every correct strategy x every fault
    python -m chaos --strategies redisson,mysql --faults kill-app,pause-app
    python -m chaos --small                      # stock 30, 240 buyers: what the tests run
    python -m chaos --docs                       # also the table into docs/results/measured/chaos.md

Uses the local stack (`make chaos` starts it) as it runs: each sale's product is reset
to its strategy, so one set of app instances serves them all. Prints a table, writes it to
reports/<time>/chaos.md, and exits 1 if a strategy that claims correctness broke an
invariant or gave a final answer that lies (the gate losing its sale with Redis's data
is reported, as its design says it may, not counted).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from datetime import UTC, datetime

from common.strategies import STRATEGIES
from loadtest.measured import recorded
from stack.config import ROOT, StackConfig

from .faults import FAULTS, expected_loss
from .sale import RETRY_POLICY, Verdict, sale_under_fault

CORRECT = [name for name, spec in STRATEGIES.items() if spec.claims_correct]


def table(verdicts: list[Verdict]) -> str:
    lines = ["| strategy | fault | orders / stock | oversold | lost updates | ledger | keys with 2 orders "
             "| replays wrong | lying answers | stall s | final answers | s |",
             "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|---:|"]
    for v in verdicts:
        answers = ", ".join(f"{k}: {n}" for k, n in sorted(v.answers.items()))
        lines.append(f"| {v.strategy} | {v.fault} | {v.orders} / {v.stock} | {v.oversold} | {v.lost_updates} "
                     f"| {'ok' if v.ledger_consistent else 'BROKEN'} | {v.double_keys} | {v.replays_wrong} "
                     f"| {v.lies} | {v.stall_seconds:.1f} | {answers} | {v.seconds:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strategies", default=",".join(CORRECT),
                        help=f"comma-separated (default: the correct ones: {','.join(CORRECT)})")
    parser.add_argument("--faults", default=",".join(FAULTS),
                        help=f"comma-separated, of: {', '.join(FAULTS)}")
    parser.add_argument("--stock", type=int, default=200)
    parser.add_argument("--buyers", type=int, default=1500)
    parser.add_argument("--threads", type=int, default=24)
    parser.add_argument("--trigger", type=int, default=50, help="inject the fault at this order")
    parser.add_argument("--small", action="store_true", help="stock 30, 240 buyers, 12 threads, trigger 10")
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/chaos.md, for the docs")
    args = parser.parse_args(argv)
    if args.small:
        args.stock, args.buyers, args.threads, args.trigger = 30, 240, 12, 10
    strategies = [s for s in args.strategies.split(",") if s]
    faults = [f for f in args.faults.split(",") if f]
    unknown = [s for s in strategies if s not in STRATEGIES] + [f for f in faults if f not in FAULTS]
    if unknown:
        parser.error(f"unknown: {', '.join(unknown)}")

    config = StackConfig.from_env()
    command = "python -m chaos " + shlex.join(sys.argv[1:] if argv is None else argv)
    print(f"$ {command}", flush=True)
    verdicts: list[Verdict] = []
    for strategy in strategies:
        for fault in faults:
            print(f"[chaos] {strategy} x {fault}: {FAULTS[fault].summary}", flush=True)
            verdict = sale_under_fault(config, strategy=strategy, fault=FAULTS[fault], stock=args.stock,
                                       buyers=args.buyers, threads=args.threads, trigger=args.trigger)
            verdicts.append(verdict)
            broke = ", ".join(verdict.broken) or "nothing"
            print(f"[chaos]   {verdict.orders}/{verdict.stock} sold, lies {verdict.lies}, "
                  f"stall {verdict.stall_seconds:.1f} s, broken: {broke}; {'; '.join(verdict.notes)}",
                  flush=True)
    broken = [v for v in verdicts if v.broken and STRATEGIES[v.strategy].claims_correct
              and not expected_loss(v.strategy, v.fault)]
    lost = [v for v in verdicts if v.broken and expected_loss(v.strategy, v.fault)]
    faults_doc = "\n".join(f"- `{f}`: {FAULTS[f].summary}" for f in faults)
    report = (f"# Sales under faults\n\n`{command}`, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC: stock "
              f"{args.stock}, {args.buyers} buyers from {args.threads} threads, each retrying with its "
              f"key on no answer, 502, 503 and 504 ({RETRY_POLICY}); the fault strikes at order "
              f"{args.trigger}.\n\n"
              f"{faults_doc}\n\n{table(verdicts)}\n")
    out = ROOT / "reports" / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    (out / "chaos.md").write_text(report)
    with recorded("chaos", command, write=args.docs):
        print(f"Stock {args.stock}, {args.buyers} buyers from {args.threads} threads, each retrying with "
              f"its key on no answer, 502, 503 and 504 ({RETRY_POLICY}); the fault strikes at order "
              f"{args.trigger}.\n\n{table(verdicts)}")
    print(f"\nreport: {out / 'chaos.md'}")
    for v in lost:
        print(f"LOST, as designed: {v.strategy} x {v.fault}: {', '.join(v.broken)} (the gate's sale is as "
              "durable as Redis; after Redis lost its data, `manage.py gate_warm` reopens it from MySQL)")
    if broken:
        print("BROKEN: " + "; ".join(f"{v.strategy} x {v.fault}: {', '.join(v.broken)}" for v in broken))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
