"""From one Locust run's raw answers (and the sale's audit) to the figures the
comparison reports; medians over rounds; the correctness gate. Pure functions:
no servers, so every step is unit-tested on small fixtures."""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from orders.figures import percentile as nearest_rank

REJECTED = ("sold_out", "conflict")
# The opening mode: how many times a buyer presses Buy in all (again after a 503 busy).
OPENING_PRESSES = 20


@dataclass(frozen=True)
class LocustTotals:
    """The Aggregated row of Locust's ``<prefix>_stats.csv``."""

    requests: int
    failures: int
    requests_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float


def parse_locust_stats(path: Path) -> LocustTotals:
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["Name"] == "Aggregated":
                return LocustTotals(
                    requests=int(row["Request Count"]),
                    failures=int(row["Failure Count"]),
                    requests_per_s=float(row["Requests/s"]),
                    p50_ms=float(row["50%"]),
                    p95_ms=float(row["95%"]),
                    p99_ms=float(row["99%"]),
                )
    raise ValueError(f"{path}: no Aggregated row")


def server_timing(header: str | list[str] | None) -> dict[str, float]:
    """``lock-wait;dur=0.1, hold;dur=2.5, arrival;desc=1763890000.123456`` →
    ``{"lock-wait": 0.1, "hold": 2.5, "arrival": 1763890000.123456}``: each metric's
    duration (ms), or for one without, its description as a number. Several headers
    (an app's and nginx's; some clients give them as a list) read as one."""
    if isinstance(header, list):
        header = ",".join(header)
    timings = {}
    for metric in (header or "").split(","):
        name, _, params = metric.strip().partition(";")
        found = dict(param.strip().partition("=")[::2] for param in params.split(";"))
        value = found.get("dur", found.get("desc"))
        try:
            number = float(value.strip('"')) if value is not None else math.nan
        except ValueError:
            continue
        if math.isfinite(number):
            timings[name] = number
    return timings


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), nearest-rank (``orders.figures``'); NaN for no
    values, as the report's cells show them."""
    found = nearest_rank(values, q)
    return math.nan if found is None else found


def _latency_ms(requests: list[tuple], q: float) -> float:
    """The q-th percentile of the requests' latencies (end - start, columns 0 and 1), ms."""
    return percentile([(r[1] - r[0]) * 1000 for r in requests], q)


def served_by_arrival(attempts: list[tuple]) -> list[bool]:
    """Whether each purchase got an order, in the order the purchases reached the app
    (their arrival stamp, the sixth column). A replayed key is left out: its purchase
    arrived before, once. So is an answer without a stamp."""
    stamped = [a for a in attempts if len(a) > 5 and a[5] is not None and a[2] != "replayed"]
    return [a[2] == "created" for a in sorted(stamped, key=lambda a: a[5])]


def fifo_score(served: list[bool]) -> float:
    """The share of the orders that went to the earliest arrivals: with S orders,
    how many of the first S arrivals got one, over S. 1.0 is first come, first served;
    orders handed out at random score about S / arrivals. NaN without an order."""
    orders = sum(served)
    return sum(served[:orders]) / orders if orders else math.nan


@dataclass(frozen=True)
class RunFigures:
    attempts: int
    created: int
    replayed: int
    sold_out: int
    busy: int
    errors: int
    seconds: float
    throughput: float  # answers per second over the whole run
    sell_out_seconds: float  # first to last successful order (NaN: none or one)
    orders_per_s: float  # while stock lasted
    rejections_per_s: float  # answers per second after the last order
    ok_p50_ms: float
    ok_p95_ms: float
    ok_p99_ms: float
    rejected_p50_ms: float
    rejected_p95_ms: float
    rejected_p99_ms: float
    # From the audit of the sale, when there is one (not for the ping ceiling).
    orders: int = 0
    oversold: int = 0
    lost_updates: int = 0
    consistent: bool = True
    retries: int = 0
    # From the purchases' Server-Timing (the app's own clock), created orders only:
    # the wait for the stock lock, and how long the lock (or the row) was held.
    wait_p50_ms: float = math.nan
    wait_p99_ms: float = math.nan
    hold_p50_ms: float = math.nan
    hold_p99_ms: float = math.nan
    # The gate's: from accepted to written by a persister, from the audit (NaN otherwise).
    confirm_p50_ms: float = math.nan
    confirm_p99_ms: float = math.nan
    # Whether the first to arrive were the ones served (fifo_score); NaN without stamps.
    fifo_score: float = math.nan


def run_figures(attempts: list[tuple], audit: dict | None = None) -> RunFigures:
    """``attempts``: (start, end, outcome[, lock wait ms, hold ms, arrival]) per
    request, as the locustfile records them."""
    if not attempts:
        raise ValueError("a run with no attempts")
    by = {k: [a for a in attempts if a[2] == k]
          for k in ("created", "replayed", "sold_out", "conflict", "busy", "error", "ping")}
    first = min(a[0] for a in attempts)
    last = max(a[1] for a in attempts)
    seconds = last - first
    created_ends = sorted(a[1] for a in by["created"])
    sell_out = created_ends[-1] - created_ends[0] if len(created_ends) > 1 else math.nan
    ok = by["created"] + by["ping"]
    rejected = [a for k in REJECTED for a in by[k]]
    after = [a for a in attempts if created_ends and a[0] > created_ends[-1]]
    after_seconds = last - created_ends[-1] if created_ends else math.nan

    def timed(column, q):  # a Server-Timing figure of the created orders that carry one
        return percentile([a[column] for a in by["created"] if len(a) > column and a[column] is not None], q)

    audit = audit or {}
    return RunFigures(
        attempts=len(attempts),
        created=len(by["created"]),
        replayed=len(by["replayed"]),
        sold_out=len(by["sold_out"]),
        busy=len(by["busy"]),
        errors=len(by["error"]) + len(by["conflict"]),
        seconds=seconds,
        throughput=len(attempts) / seconds if seconds > 0 else math.nan,
        sell_out_seconds=sell_out,
        orders_per_s=len(created_ends) / sell_out if sell_out and sell_out > 0 else math.nan,
        rejections_per_s=len(after) / after_seconds if after and after_seconds > 0 else math.nan,
        ok_p50_ms=_latency_ms(ok, 50), ok_p95_ms=_latency_ms(ok, 95), ok_p99_ms=_latency_ms(ok, 99),
        rejected_p50_ms=_latency_ms(rejected, 50), rejected_p95_ms=_latency_ms(rejected, 95),
        rejected_p99_ms=_latency_ms(rejected, 99),
        orders=audit.get("orders", 0),
        oversold=audit.get("oversold", 0),
        lost_updates=audit.get("lost_updates", 0),
        consistent=audit.get("consistent", True),
        retries=audit.get("retries", 0),
        wait_p50_ms=timed(3, 50), wait_p99_ms=timed(3, 99),
        hold_p50_ms=timed(4, 50), hold_p99_ms=timed(4, 99),
        confirm_p50_ms=audit.get("confirm_p50_ms", math.nan),
        confirm_p99_ms=audit.get("confirm_p99_ms", math.nan),
        fifo_score=fifo_score(served_by_arrival(attempts)),
    )


@dataclass(frozen=True)
class OpeningFigures:
    """A sale's opening second: the crowd reloading the page before it, and what the
    purchases sent in its first second were answered."""

    reads_before: int  # product page loads before the opening
    reads_per_s: float  # their rate, from the first load to the opening
    read_p50_ms: float  # of the loads before the opening that answered
    read_p99_ms: float
    read_errors: int  # a page that did not answer 200, before the opening or after
    first_second: int  # purchases sent in the opening's first second
    first_created: int
    first_sold_out: int
    first_busy: int
    first_errors: int
    first_p50_ms: float
    first_p99_ms: float
    early: int  # purchases answered not_started (the whole run): the countdown ran ahead
    sold_in_ms: float  # from the opening to the last order's answer (NaN: no order)
    # Every purchase, whenever it was sent (with a waiting room, most come after the
    # first second).
    purchase_p50_ms: float = math.nan
    purchase_p99_ms: float = math.nan
    # The most requests (page loads, room asks, purchases) waiting for their answer at
    # once, in the opening's first two seconds: what the back end had to hold.
    in_flight: int = 0
    # Whether the first buyers to arrive (their first request) were the ones served:
    # fifo_score over the buyers in the order they came. NaN without arrivals.
    fifo: float = math.nan
    # An open crowd: how far behind its buyers' scheduled arrivals the client sent their
    # purchases, p99 (what of its latencies is the client's own). NaN for a closed crowd.
    behind_p99_ms: float = math.nan


def opening_figures(attempts: list[tuple], reads: list[tuple], opens_at: float,
                    arrivals: list[tuple] = ()) -> OpeningFigures:
    """``attempts`` as for ``run_figures``, ``reads``: (start, end, ok) per page load
    (or room ask); ``opens_at``: the sale's start, epoch seconds (the same clock: one
    machine); ``arrivals``: (each buyer's first request's start, whether it got an order)."""
    before = [r for r in reads if r[0] < opens_at]
    answered = [r for r in before if r[2]]
    first = [a for a in attempts if opens_at <= a[0] < opens_at + 1]
    by = {k: [a for a in first if a[2] == k] for k in ("created", "sold_out", "busy")}
    created_ends = [a[1] for a in attempts if a[2] == "created"]
    read_span = opens_at - min((r[0] for r in before), default=opens_at)
    return OpeningFigures(
        reads_before=len(before),
        reads_per_s=len(before) / read_span if read_span > 0 else math.nan,
        read_p50_ms=_latency_ms(answered, 50), read_p99_ms=_latency_ms(answered, 99),
        read_errors=sum(1 for r in reads if not r[2]),
        first_second=len(first),
        first_created=len(by["created"]), first_sold_out=len(by["sold_out"]), first_busy=len(by["busy"]),
        first_errors=sum(1 for a in first if a[2] in ("error", "conflict")),
        first_p50_ms=_latency_ms(first, 50), first_p99_ms=_latency_ms(first, 99),
        early=sum(1 for a in attempts if a[2] == "early"),
        sold_in_ms=(max(created_ends) - opens_at) * 1000 if created_ends else math.nan,
        purchase_p50_ms=_latency_ms(attempts, 50), purchase_p99_ms=_latency_ms(attempts, 99),
        in_flight=most_in_flight([*attempts, *reads], opens_at, opens_at + 2),
        fifo=fifo_score([served for _, served in sorted(arrivals)]) if arrivals else math.nan,
    )


def most_in_flight(requests: list[tuple], since: float, until: float) -> int:
    """The most of ``requests`` ((start, end, ...) each) sent and not yet answered at
    one moment between ``since`` and ``until``."""
    overlapping = [r for r in requests if r[0] < until and r[1] > since]
    # A request sent before ``since`` counts from it; at one moment, answers go first.
    events = sorted([(max(r[0], since), 1) for r in overlapping] + [(r[1], -1) for r in overlapping])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def requests_per_tick(attempts: list[tuple], reads: list[tuple], opens_at: float, *,
                      before_s: float = 1.0, after_s: float = 2.0,
                      tick_s: float = 0.1) -> list[tuple[float, int, int]]:
    """(the tick's start in seconds from the opening, page loads, purchases) for every
    tick from ``before_s`` before the opening to ``after_s`` after it, by when each
    request was sent."""
    ticks = round((before_s + after_s) / tick_s)
    counts = [[0, 0] for _ in range(ticks)]
    for column, requests in ((0, reads), (1, attempts)):
        for request in requests:
            # Rounded first: 10.1 s is in the tick from 10.1, whatever floats say.
            tick = math.floor(round((request[0] - opens_at + before_s) / tick_s, 6))
            if 0 <= tick < ticks:
                counts[tick][column] += 1
    return [(round(i * tick_s - before_s, 3), page, buy) for i, (page, buy) in enumerate(counts)]


def audits_combined(audits: list[dict]) -> dict:
    """One audit for a sale spread over several products: counts add up, and the
    ledger is consistent only if it is for every product."""
    gates = [a["gate"] for a in audits if a.get("gate") and a["gate"].get("confirm_p50_ms") is not None]
    return {"orders": sum(a["orders"] for a in audits),
            "oversold": sum(a["oversold"] for a in audits),
            "lost_updates": sum(abs(a["lost_updates"]) for a in audits),
            "consistent": all(a["consistent"] for a in audits),
            "retries": sum(a.get("retries", 0) for a in audits),
            # The gate's accepted → written, of the slowest product (one, unless spread).
            "confirm_p50_ms": max((g["confirm_p50_ms"] for g in gates), default=math.nan),
            "confirm_p99_ms": max((g["confirm_p99_ms"] for g in gates), default=math.nan)}


@dataclass
class Row:
    """One line of the report: a strategy (or the ceiling), medians over its rounds."""

    label: str
    strategy: str
    claims_correct: bool
    fast_path: bool
    median: RunFigures
    rounds: list[RunFigures] = field(default_factory=list)
    ratio_to_ceiling: float = math.nan
    rejections_ratio_to_ceiling: float = math.nan
    # One round's purchases in the order they arrived: True where it got an order.
    served_by_arrival: list[bool] = field(default_factory=list)

    @property
    def worst_oversold(self) -> int:
        return max(r.oversold for r in self.rounds)

    @property
    def worst_lost_updates(self) -> int:
        return max(abs(r.lost_updates) for r in self.rounds)

    @property
    def always_consistent(self) -> bool:
        return all(r.consistent for r in self.rounds)


def median_figures(rounds: list):
    """Each field's median over the rounds (booleans: all must hold): of
    ``RunFigures`` or of ``OpeningFigures``."""
    kind = type(rounds[0])
    values = {}
    for f in fields(kind):
        column = [getattr(r, f.name) for r in rounds]
        if isinstance(column[0], bool):
            values[f.name] = all(column)
        else:
            finite = [v for v in column if not (isinstance(v, float) and math.isnan(v))]
            values[f.name] = statistics.median(finite) if finite else math.nan
            if isinstance(column[0], int) and finite:
                values[f.name] = int(round(values[f.name]))
    return kind(**values)


@dataclass
class HotRow:
    """One strategy in the hot-SKU mode: every buyer on one product, beside the
    same load spread over one product per buyer (nobody waits for anybody)."""

    label: str
    hot: Row
    spread: Row
    ceiling: float  # /api/ping's answers per second in the same run
    segments: int = 1  # the hot product's stock segments

    @property
    def strategy(self) -> str:
        return self.hot.strategy

    @property
    def hot_to_ceiling(self) -> float:
        return self.hot.median.orders_per_s / self.ceiling

    @property
    def spread_to_ceiling(self) -> float:
        return self.spread.median.orders_per_s / self.ceiling

    @property
    def hot_to_spread(self) -> float:
        return self.hot.median.orders_per_s / self.spread.median.orders_per_s


def gate(rows: list[Row]) -> list[str]:
    """Strategies that claim correctness but oversold, lost an update or left the
    ledger inconsistent in any round (not the median: one bad round is a bug)."""
    broken = []
    for row in rows:
        if row.claims_correct and (row.worst_oversold or row.worst_lost_updates or not row.always_consistent):
            broken.append(f"{row.label}: oversold {row.worst_oversold}, lost updates "
                          f"{row.worst_lost_updates}, consistent {row.always_consistent}")
    return broken


def as_dict(row: Row) -> dict:
    return {"label": row.label, "strategy": row.strategy, "claims_correct": row.claims_correct,
            "fast_path": row.fast_path, "ratio_to_ceiling": row.ratio_to_ceiling,
            "rejections_ratio_to_ceiling": row.rejections_ratio_to_ceiling,
            "median": asdict(row.median), "rounds": [asdict(r) for r in row.rounds],
            "served_by_arrival": "".join("1" if s else "0" for s in row.served_by_arrival)}


def hot_as_dict(row: HotRow) -> dict:
    return {"label": row.label, "strategy": row.strategy, "segments": row.segments,
            "ceiling": row.ceiling, "hot_to_ceiling": row.hot_to_ceiling,
            "spread_to_ceiling": row.spread_to_ceiling, "hot_to_spread": row.hot_to_spread,
            "hot": as_dict(row.hot), "spread": as_dict(row.spread)}


@dataclass
class OpeningRow:
    """One strategy at the opening second: the sale's figures (``sale``, for the gate
    and the audit) beside the opening's own, medians over rounds, and the last round's
    requests per tick around the opening (for the chart)."""

    label: str
    sale: Row
    opening: OpeningFigures
    rounds: list[OpeningFigures] = field(default_factory=list)
    ticks: list[tuple[float, int, int]] = field(default_factory=list)

    @property
    def strategy(self) -> str:
        return self.sale.strategy


def opening_as_dict(row: OpeningRow) -> dict:
    return {"label": row.label, "strategy": row.strategy, "opening": asdict(row.opening),
            "rounds": [asdict(r) for r in row.rounds], "ticks": row.ticks, "sale": as_dict(row.sale)}


def number_text(value: float, digits: int = 0) -> str:
    """A figure as the report prints it: thousands separated, NaN as a dash."""
    if isinstance(value, float) and math.isnan(value):
        return "–"
    return f"{value:,.{digits}f}"


def hot_sweep(hot_rows: list[HotRow]) -> tuple[list[int], dict[str, dict[int, HotRow]]]:
    """Segment counts, and per strategy its hot row at each count."""
    counts = sorted({h.segments for h in hot_rows})
    by_strategy: dict[str, dict[int, HotRow]] = {}
    for h in hot_rows:
        by_strategy.setdefault(h.strategy, {})[h.segments] = h
    return counts, by_strategy
