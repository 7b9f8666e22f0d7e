"""``make compare``: every strategy under the same Locust load, side by side.

    python -m loadtest.compare [--strategies a,b] [--users 200] [--stock 100]
                               [--attempts 1000] [--rounds 3] [--retry-share 0.1]
                               [--fast-path on|off|both] [--reports reports]
    python -m loadtest.compare --mode hot [--seconds 10] [--strategies a,b] [--users 200]
    python -m loadtest.compare --mode opening [--lead 6] [--refresh-ms 500] [--stock 100]
    python -m loadtest.compare --mode payment [--pay-ratio 0.7] [--window 5] [--grace 2]
                               [--payment-seconds 90] [--stock 100] [--users 200]

The default (sale) mode sells out: most answers are refusals after the stock is
gone. The hot mode is where a flash sale lives: every request buys one hot product
for ``--seconds``, then the same load is spread over one product per buyer (nobody
waits for anybody: the purchase path's own ceiling); each row gets orders/s beside
the ceiling and beside its spread run, and the app's own lock wait and hold times.
The opening mode is the herd at a sale's opening second: the sale opens ``--lead``
seconds after its reset; every user loads the product page, reloads it every
``--refresh-ms`` until the opening and then buys at once (``loadtest/locustfile.py``);
each row gets the read rate before the opening, what the first second answered and
its p50/p99, and the requests per 100 ms around the opening.
The payment mode is a sale with a payment window (``--window`` seconds): each user
buys until it has an order, then pays, or (a share ``1 - --pay-ratio``) never does.
The unpaid units come back when the expirer passes (the apps and the expirer run
with ``FLASHSALE_PAYMENT_GRACE_S`` set to ``--grace`` for it) and sell again, until
every unit is paid or ``--payment-seconds`` have passed; once the provider has
delivered every webhook and the orders settled, each row gets its orders by status,
the units returned and resold, the time from a unit's return to its next sale,
whether the paid units are the stock, and the audit.

First the ceiling: the same load on ``/api/ping`` (no database, no lock) through the
same nginx and instances. Then for each strategy: restart the app instances with it
(race delay 0: these are cost figures), and per round reset the product through the
admin API, run Locust headless against nginx, and read the audit. Every strategy in
``common.strategies`` takes part unless ``--strategies`` says otherwise.

Writes ``reports/<timestamp>/``: Locust's CSVs and each run's answers, ``report.md``,
``report.html`` (charts, offline) and ``summary.json``; updates ``reports/index.html``.
Exits 1 if a strategy that claims correctness oversold or lost an update in any
round, and says which.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from common.history import Final, Recorder, Reset
from common.history import read as read_history
from common.history import write as write_history
from common.strategies import STRATEGIES, strategy_get
from inventory.limits import MAX_SEGMENTS
from stack.config import ROOT, StackConfig
from stack.control import reconfigure

from .buyers import buyers_file
from .client import FlashsaleClient
from .figures import (
    OPENING_PRESSES,
    HotRow,
    OpeningRow,
    Row,
    RunFigures,
    as_dict,
    audits_combined,
    gate,
    hot_as_dict,
    median_figures,
    opening_as_dict,
    opening_figures,
    parse_locust_stats,
    percentile,
    requests_per_tick,
    run_figures,
    served_by_arrival,
)
from .measured import charts_copied, recorded
from .payment_figures import PaymentFigures, delivered, payment_figures, payment_table, settled
from .report import (
    FIRST_COME_COLUMNS,
    hot_table,
    markdown_table,
    opening_table,
    write_index,
    write_report,
)
from .truth import Truth

LOCUSTFILE = ROOT / "loadtest" / "locustfile.py"
# Hot mode's stock, and its cap on requests: more than any window sells, so every
# request buys.
HOT_STOCK = 1_000_000
BUYER_PREFIX = "locust-buyer-"  # Locust's n-th simulated buyer is locust-buyer-<n - 1>
# How long a payment row waits, after its run, for the provider to deliver what it
# holds: a failed delivery is tried again after up to 30 s (``payprovider``'s backoff).
WEBHOOKS_PATIENCE_S = 120


@dataclass(frozen=True)
class LocustRun:
    answers: list[tuple]  # every purchase (or ping), as the locustfile records them
    reads: list[tuple]  # opening mode: every product page load (start, end, ok)
    opens_at: float | None  # opening mode: the sale's start, epoch seconds
    arrivals: list[tuple]  # opening mode: each buyer's first request (start, got an order)
    payments: list[tuple]  # payment mode: every payment asked for and order followed (start, end, status)
    late: list[float]  # open mode: how far behind its buyer's scheduled arrival each purchase left, s


def run_locust(*, base_url: str, out: Path, sku: str, endpoint: str, users: int, attempts: int,
               retry_share: float, seconds: float = 0, skus: int = 1, refresh_ms: float = 500,
               timeout: float = 300, history: Path | None = None, tokens: Path | None = None,
               pay_ratio: float = 1.0, stop_file: Path | None = None, workers: int = 1,
               rate: float = 0, open_at: float = 0) -> LocustRun:
    """One headless Locust run; its CSVs land beside ``out``; with ``history``, every
    purchase recorded there (``common.history``); with ``tokens`` (a ``buyers_make``
    file), its buyers signed in; with ``workers`` above one, in Locust's distributed
    mode: a master and that many worker processes (``--processes``), their samples
    merged by the master. The ``open`` endpoint's crowd is ``users`` buyers arriving
    once each from ``open_at`` (epoch seconds), ``rate`` a second or in the shape of an
    opening (``loadtest.arrivals``)."""
    if workers > 1 and history:
        # A history's times are one process's monotonic clock.
        raise ValueError("a history is recorded by one Locust process: workers=1 with history")
    summary = out.with_suffix(".json")
    command = [
        str(Path(sys.executable).parent / "locust"), "-f", str(LOCUSTFILE), "--headless",
        *(["--processes", str(workers)] if workers > 1 else []),
        "-u", str(users), "-r", str(users), "-H", base_url, "--run-time", f"{int(timeout)}s",
        "--csv", str(out), "--only-summary", "--loglevel", "ERROR",
        "--sku", sku, "--endpoint", endpoint, "--attempts", str(attempts),
        "--retry-share", str(retry_share), "--summary-json", str(summary),
        "--seconds", str(seconds), "--skus", str(skus), "--refresh-ms", str(refresh_ms),
        "--pay-ratio", str(pay_ratio), *(["--stop-file", str(stop_file)] if stop_file else []),
        "--arrivals", str(users), "--rate", str(rate), "--open-at", repr(open_at),
        *(["--history", str(history)] if history else []),
        *(["--tokens", str(tokens)] if tokens else []),
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
    data = json.loads(summary.read_text())
    run = LocustRun(answers=[tuple(a) for a in data["attempts"]], reads=[tuple(r) for r in data["reads"]],
                    opens_at=data["opens_at"], payments=[tuple(p) for p in data.get("payments", [])],
                    arrivals=[tuple(a) for a in data.get("arrivals", [])], late=data.get("late", []))
    # The CSV's last snapshot holds every purchase and page read (the run quits a while
    # after the last is answered), and may miss a payment's last follow-up still in flight;
    # distributed, the samples may miss one too (a worker sends them once its purchases
    # are answered, and may follow an order a while longer; no figure reads them).
    counted = len(run.answers) + len(run.reads)
    seen = counted + len(run.payments) if workers == 1 else totals.requests
    if not counted <= totals.requests <= seen or not run.payments and totals.requests != counted:
        raise RuntimeError(f"locust counted {totals.requests} requests, the locustfile {seen}")
    return run


def close_history(config: StackConfig, path: Path, products: list[str], *, stock: int, segments: int,
                  reset_at: int) -> None:
    """Complete the purchases Locust recorded at ``path``: each product's reset
    before them (at ``reset_at``), and after them the final read (the stock the audit
    finds, every order row in MariaDB)."""
    client, truth = FlashsaleClient.for_stack(config), Truth(config, signed_in=config.buyer_auth)
    try:
        finals = [Final(p, client.audit(p)["remaining"], truth.orders(p), Recorder.now()) for p in products]
    finally:
        truth.close()
    resets = [Reset(p, stock, reset_at, segments) for p in products]
    write_history(path, [*resets, *read_history(path), *finals])


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


def _file_label(label: str) -> str:
    return label.replace(" ", "_").replace("(", "").replace(")", "").replace("×", "x")


class Comparison:
    """One run of the runner: the stack, the Locust settings and the output folder."""

    def __init__(self, args, config: StackConfig, out_dir: Path):
        self.args = args
        self.config = config
        self.client = FlashsaleClient.for_stack(config)
        self.out_dir = out_dir
        # Hot mode: a window, and a stock no window can sell out, so every request buys.
        # Opening mode: every buyer ends by itself; the cap is what they could all press.
        self.seconds = {"hot": args.seconds, "payment": args.payment_seconds}.get(args.mode, 0)
        caps = {"hot": HOT_STOCK, "opening": args.users * OPENING_PRESSES, "payment": HOT_STOCK}
        self.attempts = caps.get(args.mode, args.attempts)
        self.retry_share = args.retry_share if args.mode == "sale" else 0
        # One account a simulated buyer, when the instances take the buyer from
        # credentials: its tokens outlast the longest comparison.
        self.tokens = (buyers_file(config, out_dir / "buyers.tsv", prefix=BUYER_PREFIX, count=args.users,
                                   hours=12) if config.buyer_auth else None)

    def locust(self, label: str, sku: str, endpoint: str, n: int, skus: int = 1,
               history: Path | None = None, stop_file: Path | None = None, open_at: float = 0) -> LocustRun:
        return run_locust(base_url=self.config.base_url, out=self.out_dir / f"{_file_label(label)}-r{n}",
                          sku=sku, endpoint=endpoint, users=self.args.users, attempts=self.attempts,
                          retry_share=self.retry_share, seconds=self.seconds, skus=skus,
                          refresh_ms=self.args.refresh_ms, history=history, tokens=self.tokens,
                          pay_ratio=self.args.pay_ratio, stop_file=stop_file, workers=self.args.workers,
                          open_at=open_at)

    def history(self, label: str, n: int) -> Path | None:
        """Where round ``n`` of ``label`` records its history, if ``--history`` asked."""
        return self.out_dir / f"{_file_label(label)}-r{n}.history.jsonl" if self.args.history else None

    def ceiling(self) -> Row:
        rounds = measure("ceiling (/api/ping)", self.args.rounds,
                         lambda n: run_figures(self.locust("ping", "-", "ping", n).answers))
        return Row(label="ping (no-op ceiling)", strategy="ping", claims_correct=False,
                   fast_path=True, median=median_figures(rounds), rounds=rounds, ratio_to_ceiling=1.0)

    def sale(self, label: str, strategy: str, *, stock: int, skus: int = 1, segments: int = 1,
             fast_path: bool = True, ceiling: Row) -> Row:
        """``rounds`` sales of one strategy (the instances already run it): each resets
        the product(s) (in ``segments``), runs Locust and reads the audit."""
        sku = f"compare-{strategy}" if skus == 1 else f"spread-{strategy}"
        products = [sku] if skus == 1 else [f"{sku}-{k}" for k in range(skus)]

        served = []

        def one_round(n):
            history, reset_at = self.history(label, n), Recorder.now()
            for product in products:
                self.client.reset(product, stock, name=f"Compared under {label}", segments=segments)
            answers = self.locust(label, sku, "purchase", n, skus=skus, history=history).answers
            if history:
                close_history(self.config, history, products, stock=stock, segments=segments,
                              reset_at=reset_at)
            served[:] = served_by_arrival(answers)  # the last round's, for the chart
            return run_figures(answers, audits_combined([self.client.audit(p) for p in products]))

        rounds = measure(label, self.args.rounds, one_round)
        median = median_figures(rounds)
        return Row(label=label, strategy=strategy, claims_correct=strategy_get(strategy).claims_correct,
                   fast_path=fast_path, median=median, rounds=rounds,
                   ratio_to_ceiling=median.throughput / ceiling.median.throughput,
                   rejections_ratio_to_ceiling=median.rejections_per_s / ceiling.median.throughput,
                   served_by_arrival=served)

    def opening(self, strategy: str, *, room: bool = False) -> OpeningRow:
        """``rounds`` sales that open ``--lead`` seconds after their reset, with the
        crowd waiting on the page (the instances already run ``strategy``); with
        ``room``, in the sale's waiting room (``--room-rate``, ``--room-active``)."""
        label = f"{strategy}, waiting room" if room else strategy
        sku = f"opening-room-{strategy}" if room else f"opening-{strategy}"
        terms = {"room_rate": self.args.room_rate, "room_active": self.args.room_active} if room else {}
        openings: list = []
        ticks: list = []

        def one_round(n):
            self.client.reset(sku, self.args.stock, name=f"Opening under {label}",
                              starts_in=self.args.lead, **terms)
            # The page is warm, as it is long before a real sale: the crowd's first
            # loads do not all wait on the instances' (just restarted) first fill.
            self.client.product(sku)
            run = self.locust(label, sku, "opening-room" if room else "opening", n)
            if run.opens_at is None:
                raise RuntimeError(f"{label}: no buyer read the sale's start from the product page")
            openings.append(opening_figures(run.answers, run.reads, run.opens_at, run.arrivals))
            ticks[:] = requests_per_tick(run.answers, run.reads, run.opens_at)
            return run_figures(run.answers, self.client.audit(sku))

        return self._opening_row(label, strategy, one_round, openings, ticks)

    def open_opening(self, strategy: str) -> OpeningRow:
        """``rounds`` sales that open ``--lead`` seconds after their reset, to an open
        crowd: ``--users`` buyers arriving once each from the opening on, in its shape
        (``loadtest.arrivals``), whatever the answers; each latency counts from its
        buyer's arrival."""
        label = f"{strategy}, open crowd"
        sku = f"opening-open-{strategy}"
        openings: list = []
        ticks: list = []

        def one_round(n):
            self.client.reset(sku, self.args.stock, name=f"Opening under {label}", starts_in=self.args.lead)
            opens_at = datetime.fromisoformat(self.client.product(sku)["starts_at"]).timestamp()
            run = self.locust(label, sku, "open", n, open_at=opens_at)
            figures = opening_figures(run.answers, [], opens_at)
            openings.append(replace(figures, behind_p99_ms=percentile(run.late, 99) * 1000))
            ticks[:] = requests_per_tick(run.answers, [], opens_at)
            return run_figures(run.answers, self.client.audit(sku))

        return self._opening_row(label, strategy, one_round, openings, ticks)

    def _opening_row(self, label: str, strategy: str, one_round, openings: list, ticks: list) -> OpeningRow:
        """``rounds`` of ``one_round`` (which adds each round's opening figures to
        ``openings`` and its ticks to ``ticks``): their medians, as one row."""
        rounds = measure(label, self.args.rounds, one_round)
        sale = Row(label=label, strategy=strategy, claims_correct=strategy_get(strategy).claims_correct,
                   fast_path=True, median=median_figures(rounds), rounds=rounds)
        return OpeningRow(label=label, sale=sale, opening=median_figures(openings), rounds=openings,
                          ticks=ticks)

    def payment(self, strategy: str) -> tuple[str, PaymentFigures]:
        """``rounds`` sales with a payment window (the instances already run
        ``strategy``): each resets the product, runs Locust until every unit is paid or
        the window of the run passes, waits for the orders to settle, and reads them."""
        sku = f"payment-{strategy}"
        rounds = []
        truth = Truth(self.config, signed_in=self.config.buyer_auth)
        try:
            for n in range(1, self.args.rounds + 1):
                self.client.reset(sku, self.args.stock, name=f"Paid or released under {strategy}",
                                  strategy=strategy, payment_window_s=self.args.window)
                started = time.monotonic()
                stop = self.out_dir / f"{_file_label(strategy)}-r{n}.stop"
                done: list = []
                locust = threading.Thread(target=self._run_into, args=(done, strategy, sku, n, stop))
                locust.start()
                while locust.is_alive():  # every unit paid: the buyers still waiting may stop
                    if not stop.exists() and truth.statuses(sku).get("paid", 0) >= self.args.stock:
                        stop.touch()
                    locust.join(0.5)
                if not done or isinstance(done[0], Exception):
                    raise RuntimeError(f"{strategy}: the Locust run failed; see {self.out_dir}") from (
                        done[0] if done else None)
                seconds = time.monotonic() - started
                try:  # every payment made is queued at the provider by now
                    delivered_s = delivered(self.config, within=WEBHOOKS_PATIENCE_S)
                except RuntimeError as e:
                    raise RuntimeError(f"{strategy}: {e}") from e
                settled(truth, sku, within=self.args.window + self.args.grace + 5)
                figures = payment_figures(truth, sku, stock=self.args.stock, audit=self.client.audit(sku),
                                          seconds=seconds, delivered_s=delivered_s)
                rounds.append(figures)
                print(f"  {strategy} round {n}/{self.args.rounds}: {figures.orders} orders, "
                      f"{figures.paid} paid, {figures.expired} expired, {figures.resold} resold "
                      f"[{seconds:.0f}s; webhooks all delivered {delivered_s:.1f}s later]", flush=True)
        finally:
            truth.close()
        # The round with the median time to resale: its figures together, not a mix of rounds.
        ranked = sorted(rounds, key=lambda f: (math.isnan(f.resale_p50_s), f.resale_p50_s))
        return strategy, ranked[len(ranked) // 2]

    def _run_into(self, done: list, strategy: str, sku: str, n: int, stop: Path) -> None:
        try:
            done.append(self.locust(strategy, sku, "payment", n, stop_file=stop))
        except Exception as e:  # raised again in the runner's thread
            done.append(e)

    def use(self, strategy: str, fast_path: bool = True) -> None:
        reconfigure(self.config.replace(strategy=strategy, section_delay_ms=0.0, fast_path=fast_path))


def sale_mode(run: Comparison, strategies: list[str], modes: list[bool]) -> list[Row]:
    """Most requests come after the stock is gone: what a whole sale costs."""
    ceiling = run.ceiling()
    rows = [ceiling]
    for i, strategy in enumerate(strategies, 1):
        for fast_path in modes:
            mark = "mark" if fast_path else "no mark"
            label = strategy if len(modes) == 1 else f"{strategy} ({mark})"
            print(f"[{i}/{len(strategies)}] {label}", flush=True)
            run.use(strategy, fast_path)
            rows.append(run.sale(label, strategy, stock=run.args.stock, fast_path=fast_path,
                                 ceiling=ceiling))
    return rows


def hot_mode(run: Comparison, strategies: list[str],
             segment_counts: list[int]) -> tuple[list[Row], list[HotRow]]:
    """Every request buys: one hot product (in each of ``segment_counts`` segments),
    then the same load spread over one product per buyer (nobody waits for anybody:
    the purchase path's own ceiling)."""
    ceiling = run.ceiling()
    hot_rows = []
    for i, strategy in enumerate(strategies, 1):
        print(f"[{i}/{len(strategies)}] {strategy}", flush=True)
        run.use(strategy)
        spread = run.sale(f"{strategy} (spread)", strategy, stock=HOT_STOCK, skus=run.args.users,
                          ceiling=ceiling)
        for count in segment_counts if strategy_get(strategy).segmented else [1]:
            label = strategy if count == 1 else f"{strategy} ×{count}"
            hot = run.sale(label, strategy, stock=HOT_STOCK, segments=count, ceiling=ceiling)
            hot_rows.append(HotRow(label=label, hot=hot, spread=spread, ceiling=ceiling.median.throughput,
                                   segments=count))
    return [ceiling], hot_rows


def opening_mode(run: Comparison, strategies: list[str], rooms: list[str], *,
                 open_crowd: bool = True) -> list[OpeningRow]:
    """The herd at the opening second, one strategy after another; for those in
    ``rooms``, the same herd in a waiting room next; then, with ``open_crowd``, as many
    buyers arriving in the opening's shape without waiting for answers."""
    rows = []
    for i, strategy in enumerate(strategies, 1):
        print(f"[{i}/{len(strategies)}] {strategy}", flush=True)
        run.use(strategy)
        rows.append(run.opening(strategy))
        if strategy in rooms:
            rows.append(run.opening(strategy, room=True))
        if open_crowd:
            rows.append(run.open_opening(strategy))
    return rows


def payment_mode(run: Comparison, strategies: list[str]) -> list[tuple[str, PaymentFigures]]:
    """A sale with a payment window, one strategy after another."""
    rows = []
    for i, strategy in enumerate(strategies, 1):
        print(f"[{i}/{len(strategies)}] {strategy}", flush=True)
        run.use(strategy)
        rows.append(run.payment(strategy))
    return rows


def main(argv: list[str] | None = None) -> int:  # noqa: C901 (the modes' options, each read once)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=["sale", "hot", "opening", "payment"], default="sale",
                        help="sale: stock runs out, most answers are refusals; "
                             "hot: every request buys, for a window of --seconds; "
                             "opening: the crowd waits on the page, then buys at the opening second; "
                             "payment: a sale with a payment window, a share of buyers never pays")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1,
                        help="Locust processes sending the load (distributed mode: a master and this "
                             "many workers, the users and requests shared evenly)")
    parser.add_argument("--stock", type=int, default=100, help="sale and opening modes")
    parser.add_argument("--lead", type=float, default=6,
                        help="opening mode: seconds from the reset to the opening (the users start "
                             "and wait on the page meanwhile)")
    parser.add_argument("--refresh-ms", type=float, default=500,
                        help="opening mode: how often a waiting user reloads the page")
    parser.add_argument("--rooms", default="atomic,gate",
                        help="opening mode: the strategies whose sale also runs with a waiting room, "
                             "beside the open crowd (empty: none)")
    parser.add_argument("--open-crowd", action=argparse.BooleanOptionalAction, default=True,
                        help="opening mode: after each strategy's closed crowd, an open one: as many "
                             "buyers arriving once each in the opening's shape (a climb to its peak at "
                             "1 s, then halving every second), their latency from their arrival")
    parser.add_argument("--room-rate", type=int, default=50,
                        help="opening mode: the waiting room's admissions a second")
    parser.add_argument("--room-active", type=int, default=50,
                        help="opening mode: the most admitted and not yet bought at once")
    parser.add_argument("--attempts", type=int, default=1000,
                        help="sale mode: requests per run, retries included")
    parser.add_argument("--seconds", type=float, default=10, help="hot mode: the window of each run")
    parser.add_argument("--segments", default="1",
                        help="hot mode: the hot product's stock segments, a count or a list to "
                             "sweep (1,2,4,8)")
    parser.add_argument("--pay-ratio", type=float, default=0.7,
                        help="payment mode: the share of buyers who pay (the rest never do)")
    parser.add_argument("--window", type=int, default=5, help="payment mode: the sale's payment window, s")
    parser.add_argument("--grace", type=float, default=2,
                        help="payment mode: FLASHSALE_PAYMENT_GRACE_S for the apps and the expirer")
    parser.add_argument("--payment-seconds", type=float, default=90,
                        help="payment mode: the longest a run lasts (it ends once every buyer is done)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--retry-share", type=float, default=0.1, help="sale mode")
    parser.add_argument("--fast-path", choices=["on", "off", "both"], default="on",
                        help="sale mode: the sold-out mark; 'both' runs each strategy with and without it")
    parser.add_argument("--reports", default=str(ROOT / "reports"))
    parser.add_argument("--history", action="store_true",
                        help="sale and hot modes: record each round's history beside its CSVs "
                             "(<label>-r<n>.history.jsonl; check one with python -m verdicts check)")
    parser.add_argument("--docs", action="store_true",
                        help="also write the table to docs/results/measured/compare-<mode>.md "
                             "and its charts beside it, for the docs")
    args = parser.parse_args(argv)
    strategies = [strategy_get(s.strip()).name for s in args.strategies.split(",")]
    modes = {"on": [True], "off": [False], "both": [True, False]}[args.fast_path]
    try:
        segment_counts = [int(n) for n in args.segments.split(",")]
        if any(not 1 <= n <= MAX_SEGMENTS for n in segment_counts):
            raise ValueError
    except ValueError:
        parser.error(f"--segments: counts of 1 to {MAX_SEGMENTS}, comma-separated, not {args.segments!r}")

    if args.workers < 1:
        parser.error(f"--workers: one or more, not {args.workers}")
    if args.workers > 1 and args.history:
        parser.error("--history records one Locust process's clock: not with --workers above 1")
    config = StackConfig.from_env()
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = Path(args.reports) / stamp
    out_dir.mkdir(parents=True, exist_ok=True)
    command = "python -m loadtest.compare " + shlex.join(argv if argv is not None else sys.argv[1:])
    servers = (f"{config.instances} instances x {config.workers} workers x {config.threads} threads "
               f"behind nginx, race delay 0, {args.rounds} round(s); medians")
    processes = f" in {args.workers} worker processes" if args.workers > 1 else ""
    client = (f"{args.users} Locust users{processes} on 127.0.0.1 ({os.cpu_count()} cores shared with "
              f"the servers)")
    if args.mode == "opening":
        setup = (f"The opening second: {client}; the sale opens {args.lead:g} s after its reset with stock "
                 f"{args.stock}; every user loads the product page, reloads it every {args.refresh_ms:g} ms "
                 f"(±50%) until the opening, then buys (a 503 busy is pressed again, up to "
                 f"{OPENING_PRESSES} times); with a waiting room ({args.room_rate} admissions a second, "
                 f"at most {args.room_active} admitted at once), every user loads the page once, asks the "
                 f"room for its place and asks again as often until admitted, then buys with its "
                 f"admission (the room's asks count as page loads); {servers}")
    elif args.mode == "payment":
        setup = (f"Pay or release: {client}, stock {args.stock}, a {args.window} s payment window and "
                 f"{args.grace:g} s of grace; each user buys until it has an order, then "
                 f"{args.pay_ratio:.0%} of them pay and the rest never do; a run ends once every user is "
                 f"done, or after "
                 f"{args.payment_seconds:g} s; {servers}")
    elif args.mode == "hot":
        setup = (f"Hot SKU: {client}, every request buys (stock {HOT_STOCK:,}, no retries), "
                 f"{args.seconds:g} s per run, the hot product in {args.segments} segment(s); "
                 f"spread: the same users over {args.users} products, one each; {servers}")
    else:
        setup = (f"{client}, {args.attempts} requests per run ({args.retry_share:.0%} sent twice with "
                 f"the same key), stock {args.stock}, {servers}")
    # Locust's own percentiles are bucketed; the report's come from the samples.
    setup += "; every percentile from each answer's own latency (nearest rank)"
    if args.workers > 1:
        setup += ", the workers' samples merged"
    print(f"Comparing {len(strategies)} strategies: {setup}\nRaw data: {out_dir}", flush=True)

    run = Comparison(args, config, out_dir)
    rows: list[Row] = []
    hot_rows: list[HotRow] = []
    opening_rows: list[OpeningRow] = []
    payment_rows: list[tuple[str, PaymentFigures]] = []
    grace = os.environ.get("FLASHSALE_PAYMENT_GRACE_S")
    try:
        if args.mode == "payment":  # the apps and the expirer take it as they restart
            os.environ["FLASHSALE_PAYMENT_GRACE_S"] = str(args.grace)
        reconfigure(config.replace(section_delay_ms=0.0))
        if args.mode == "hot":
            rows, hot_rows = hot_mode(run, strategies, segment_counts)
        elif args.mode == "opening":
            rooms = [strategy_get(s.strip()).name for s in args.rooms.split(",") if s.strip()]
            opening_rows = opening_mode(run, strategies, rooms, open_crowd=args.open_crowd)
        elif args.mode == "payment":
            payment_rows = payment_mode(run, strategies)
        else:
            rows = sale_mode(run, strategies, modes)
    finally:
        if grace is None:
            os.environ.pop("FLASHSALE_PAYMENT_GRACE_S", None)
        else:
            os.environ["FLASHSALE_PAYMENT_GRACE_S"] = grace
        reconfigure(config)  # the strategy the stack was started with
    if payment_rows:
        return _payment_report(args, command, setup, out_dir, payment_rows)

    broken = gate(rows + [r for h in hot_rows for r in (h.hot, h.spread)] + [o.sale for o in opening_rows])
    md, report = write_report(out_dir, rows, stamp=stamp, command=command, setup=setup,
                              rounds=args.rounds, broken=broken, hot_rows=hot_rows, opening_rows=opening_rows)
    (out_dir / "summary.json").write_text(json.dumps(
        {"command": command, "mode": args.mode, "setup": setup, "broken": broken,
         "rows": [as_dict(r) for r in rows], "hot_rows": [hot_as_dict(h) for h in hot_rows],
         "opening_rows": [opening_as_dict(o) for o in opening_rows]},
        indent=1, default=str))
    write_index(Path(args.reports))
    print()
    print(f"command: {command}")
    with recorded(f"compare-{args.mode}", command, write=args.docs):
        print(f"`{command}`: {setup}\n")
        if opening_rows:
            print(opening_table(opening_rows))
        else:
            print(hot_table(hot_rows, rows[0]) if hot_rows else markdown_table(rows))
    if args.mode == "sale" and args.docs:  # who got the stock, for its own page
        with recorded("compare-sale-first-come", command, write=True):
            print(f"`{command}`: {setup}\n")
            print(markdown_table([r for r in rows if r.strategy != "ping"], FIRST_COME_COLUMNS))
    if args.docs:
        for chart in charts_copied(out_dir, f"compare-{args.mode}"):
            print(f"written for the docs: {chart}")
    print(f"\nReport: {report}\nTable:  {md}")
    if broken:
        print("FAIL: strategies that claim correctness did not hold:\n  " + "\n  ".join(broken),
              file=sys.stderr)
        return 1
    return 0


def _payment_report(args, command: str, setup: str, out_dir: Path,
                    rows: list[tuple[str, PaymentFigures]]) -> int:
    """The payment mode's table (and summary.json); fails unless every correct strategy
    ended with its stock paid once, nothing oversold and its ledger consistent."""
    # What a run that ended short needs to be read: where the other units went.
    broken = [f"{label}: paid {f.paid} of {f.stock}, oversold {f.oversold}, consistent {f.consistent} "
              f"({f.orders} orders, {f.expired} expired, {f.returned} units returned, {f.resold} resold; "
              f"payments: {f.payments_unsettled} without their webhook handled, {f.payments_refunded} "
              f"refunded; run {f.seconds:.0f} s)"
              for label, f in rows if strategy_get(label).claims_correct
              and (not f.paid_is_stock or f.oversold or not f.consistent)]
    (out_dir / "summary.json").write_text(json.dumps(
        {"command": command, "mode": "payment", "setup": setup, "broken": broken,
         "payment_rows": [{"label": label, **f.as_dict()} for label, f in rows]}, indent=1, default=str))
    write_index(Path(args.reports))
    print(f"\ncommand: {command}")
    with recorded("compare-payment", command, write=args.docs):
        print(f"`{command}`: {setup}\n")
        print(payment_table(rows))
    if broken:
        print("FAIL: strategies that claim correctness did not end with every unit paid once:\n  "
              + "\n  ".join(broken), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
