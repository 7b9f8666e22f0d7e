"""How long the history checker takes (``verdicts.checker``), on made-up sales whose
answer is known (``verdicts.synthetic.concurrent_sale``: linearizable by construction).

    python -m benchmarks.checker [--seeds 10] [--plain] [--docs]

Each row is a kind of history, checked once per seed: the median and the slowest
check, and the most states the search cached. The first rows are the histories a
failover leaves: one product, 32 overlapping buyers, 5 % of the answers lost, no
final read (the sale's end never read back). ``--plain`` checks those again without
the stock's bound on the search (what it prunes), with the same budget.

The second table is sales with a payment window (``window_sale``: 460 buyers, stock
60, half the orders paid, the rest expiring and selling again) whose payments are
held up to a share of the window before they land, as a webhook storm holds them:
each one that lands after its order fell due leaves an expiry that may or may not
have happened.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time

from loadtest.measured import recorded
from verdicts.checker import check
from verdicts.synthetic import concurrent_sale, paid_after_due, window_sale

BUDGET = 2_000_000  # states: the checker's default
# (operations, buyers, stock, unknown share, final read)
ROWS = [(5_000, 32, 100, 0.05, False), (5_000, 32, 1_000, 0.05, False), (5_000, 32, 2_500, 0.05, False),
        (5_000, 32, 4_000, 0.05, False), (10_000, 32, 5_000, 0.02, True), (10_000, 128, 5_000, 0.02, True)]


def _row(operations: int, buyers: int, stock: int, unknown: float, final: bool, *, seeds: int,
         pruned: bool) -> str:
    seconds, states, verdicts = [], [], []
    for seed in range(seeds):
        events = concurrent_sale(stock=stock, operations=operations, clients=buyers, seed=seed,
                                 unknown_share=unknown, final=final)
        started = time.perf_counter()
        sku = check(events, budget_states=BUDGET, pruned=pruned).skus[0]
        seconds.append(time.perf_counter() - started)
        states.append(sku.searched)
        verdicts.append(sku.linearizable)
    return (f"| {operations:,} | {buyers} | {stock:,} | {unknown:.0%} | {'yes' if final else 'no'} "
            f"| {'with' if pruned else 'without'} | {statistics.median(seconds):.2f} | {max(seconds):.2f} "
            f"| {max(states):,} | {_tally(verdicts)} |")


def _tally(verdicts: list) -> str:
    said = {True: "linearizable", False: "NOT linearizable", None: "budget spent"}
    return ", ".join(f"{said[v]}: {verdicts.count(v)}" for v in (True, None, False) if verdicts.count(v))


WINDOW = 5_000  # the window sales' window, in their nanoseconds
HELD = [0, 1_000, 2_000, 5_000]  # how long a payment may be held up before it lands


def _window_row(held: int, *, seeds: int) -> str:
    states, verdicts, late = [], [], []
    for seed in range(seeds):
        events = window_sale(stock=60, buyers=460, clients=16, window=WINDOW, held=held, seed=seed)
        late.append(paid_after_due(events, WINDOW))
        sku = check(events, budget_states=BUDGET).skus[0]
        states.append(sku.searched)
        verdicts.append(sku.linearizable)
    return (f"| {held / WINDOW:.0%} | {statistics.median(late):.0f} | {statistics.median(states):,.0f} "
            f"| {max(states):,} | {_tally(verdicts)} |")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m benchmarks.checker",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10, help="histories a row (seeds 0 to N-1)")
    parser.add_argument("--plain", action="store_true", help="each row without the stock's bound too")
    parser.add_argument("--docs", action="store_true", help="also write the table to docs/results/measured/")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.checker " + shlex.join(argv)
    with recorded("checker", command, write=args.docs):
        print(f"`{command.strip()}`: each row checked on {args.seeds} histories (seeds 0 to "
              f"{args.seeds - 1}), one after another on one core; a budget of {BUDGET:,} states.\n")
        print("| operations | buyers | stock | answers lost | final read | stock's bound | median s "
              "| slowest s | most states | verdicts |\n|---:|---:|---:|---:|---|---|---:|---:|---:|---|")
        for row in ROWS:
            # Without the bound, the 10,000-operation rows take minutes a history.
            for pruned in (True, False) if args.plain and row[0] <= 5_000 else (True,):
                print(_row(*row, seeds=args.seeds, pruned=pruned), flush=True)
        print("\nSales with a payment window, payments held up: 460 buyers, stock 60, the same seeds.\n")
        print("| held up to (of the window) | paid after due (median) | median states | most states "
              "| verdicts |\n|---:|---:|---:|---:|---|")
        for held in HELD:
            print(_window_row(held, seeds=args.seeds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
