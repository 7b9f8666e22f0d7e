"""``make compare``: every strategy under the same Locust load, side by side.

    python -m loadtest.compare [--strategies a,b] [--users 200] [--stock 100]
                               [--attempts 1000] [--rounds 3] [--retry-share 0.1]
                               [--fast-path on|off|both] [--reports reports]

First the ceiling: the same load on ``/api/ping`` (no database, no lock) through the
same nginx and instances. Then for each strategy: restart the app instances with it
(race delay 0: these are cost figures), and per round reset the product through the
admin API, run Locust headless against nginx, and read the audit. Every strategy in
``flashsale.strategies`` takes part unless ``--strategies`` says otherwise.

Writes ``reports/<timestamp>/``: Locust's CSVs and each run's answers, ``report.md``,
``report.html`` (charts, offline) and ``summary.json``; updates ``reports/index.html``.
Exits 1 if a strategy that claims correctness oversold or lost an update in any
round, and says which.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from flashsale.strategies import STRATEGIES, strategy_get
from stack.config import ROOT, StackConfig
from stack.control import reconfigure

from .client import FlashsaleClient
from .figures import Row, RunFigures, as_dict, gate, median_figures, parse_locust_stats, run_figures
from .report import markdown_table, write_index, write_report

LOCUSTFILE = ROOT / "loadtest" / "locustfile.py"


def run_locust(*, base_url: str, out: Path, sku: str, endpoint: str, users: int, attempts: int,
               retry_share: float, timeout: float = 300) -> list[tuple[float, float, str]]:
    """One headless Locust run; its CSVs land beside ``out``. Returns every answer."""
    summary = out.with_suffix(".json")
    command = [
        str(Path(sys.executable).parent / "locust"), "-f", str(LOCUSTFILE), "--headless",
        "-u", str(users), "-r", str(users), "-H", base_url, "--run-time", f"{int(timeout)}s",
        "--csv", str(out), "--only-summary", "--loglevel", "ERROR",
        "--sku", sku, "--endpoint", endpoint, "--attempts", str(attempts),
        "--retry-share", str(retry_share), "--summary-json", str(summary),
    ]
    # Locust exits 1 when any request failed (a 503 busy counts): the figures say
    # how many, so only a missing summary is an error here. Its own summary (on
    # stderr) goes to a log; the locustfile's progress lines (stdout) to the terminal.
    with open(out.with_suffix(".log"), "w") as log:
        subprocess.run(command, stderr=log, cwd=ROOT, timeout=timeout + 60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    if not summary.exists():
        raise RuntimeError(f"locust wrote no summary; see {out.with_suffix('.log')}")
    totals = parse_locust_stats(Path(f"{out}_stats.csv"))
    answers = [tuple(a) for a in json.loads(summary.read_text())["attempts"]]
    if totals.requests != len(answers):  # the CSV and the hook saw different runs
        raise RuntimeError(f"locust counted {totals.requests} requests, the locustfile {len(answers)}")
    return answers


def measure(label: str, rounds: int, one_round) -> list[RunFigures]:
    figures = []
    for n in range(1, rounds + 1):
        started = time.monotonic()
        f = one_round(n)
        figures.append(f)
        print(f"  {label} round {n}/{rounds}: {f.attempts} answers in {f.seconds:.1f}s "
              f"({f.throughput:,.0f} req/s), {f.created} orders, {f.busy} busy "
              f"[{time.monotonic() - started:.0f}s]", flush=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--stock", type=int, default=100)
    parser.add_argument("--attempts", type=int, default=1000, help="requests per run, retries included")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--retry-share", type=float, default=0.1)
    parser.add_argument("--fast-path", choices=["on", "off", "both"], default="on",
                        help="the sold-out mark; 'both' runs each strategy with and without it")
    parser.add_argument("--reports", default=str(ROOT / "reports"))
    args = parser.parse_args(argv)
    strategies = [strategy_get(s.strip()).name for s in args.strategies.split(",")]
    modes = {"on": [True], "off": [False], "both": [True, False]}[args.fast_path]

    config = StackConfig.from_env()
    client = FlashsaleClient.for_stack(config)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = Path(args.reports) / stamp
    out_dir.mkdir(parents=True, exist_ok=True)
    command = "python -m loadtest.compare " + shlex.join(argv if argv is not None else sys.argv[1:])
    setup = (f"{args.users} Locust users on 127.0.0.1 ({os.cpu_count()} cores shared with the servers), "
             f"{args.attempts} requests per run ({args.retry_share:.0%} sent twice with the same key), "
             f"stock {args.stock}, {config.instances} instances x {config.workers} workers x "
             f"{config.threads} threads behind nginx, race delay 0, {args.rounds} round(s); medians")
    print(f"Comparing {len(strategies)} strategies: {setup}\nRaw data: {out_dir}", flush=True)

    def locust(label, sku, endpoint, n):
        return run_locust(base_url=config.base_url, out=out_dir / f"{label}-r{n}", sku=sku,
                          endpoint=endpoint, users=args.users, attempts=args.attempts,
                          retry_share=args.retry_share)

    rows: list[Row] = []
    try:
        reconfigure(config.replace(race_delay_ms=0.0))
        ceiling_rounds = measure("ceiling (/api/ping)", args.rounds,
                                 lambda n: run_figures(locust("ping", "-", "ping", n)))
        ceiling = Row(label="ping (no-op ceiling)", strategy="ping", claims_correct=False,
                      fast_path=True, median=median_figures(ceiling_rounds), rounds=ceiling_rounds,
                      ratio_to_ceiling=1.0)
        rows.append(ceiling)
        for i, strategy in enumerate(strategies, 1):
            for fast_path in modes:
                mark = "mark" if fast_path else "no mark"
                label = strategy if len(modes) == 1 else f"{strategy} ({mark})"
                print(f"[{i}/{len(strategies)}] {label}", flush=True)
                reconfigure(config.replace(strategy=strategy, race_delay_ms=0.0, fast_path=fast_path))
                sku = f"compare-{strategy}"

                def one_round(n, sku=sku, label=label):
                    client.reset(sku, args.stock, name=f"Compared under {label}")
                    answers = locust(label.replace(" ", "_").replace("(", "").replace(")", ""), sku,
                                     "purchase", n)
                    return run_figures(answers, client.audit(sku))

                rounds = measure(label, args.rounds, one_round)
                median = median_figures(rounds)
                rows.append(Row(label=label, strategy=strategy,
                                claims_correct=strategy_get(strategy).claims_correct, fast_path=fast_path,
                                median=median, rounds=rounds,
                                ratio_to_ceiling=median.throughput / ceiling.median.throughput,
                                rejections_ratio_to_ceiling=median.rejections_per_s
                                / ceiling.median.throughput))
    finally:
        reconfigure(config)  # the strategy the stack was started with

    broken = gate(rows)
    md, report = write_report(out_dir, rows, stamp=stamp, command=command, setup=setup,
                              rounds=args.rounds, broken=broken)
    (out_dir / "summary.json").write_text(json.dumps(
        {"command": command, "setup": setup, "broken": broken, "rows": [as_dict(r) for r in rows]},
        indent=1, default=str))
    write_index(Path(args.reports))
    print()
    print(f"command: {command}")
    print(markdown_table(rows))
    print(f"\nReport: {report}\nTable:  {md}")
    if broken:
        print("FAIL: strategies that claim correctness did not hold:\n  " + "\n  ".join(broken),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
