"""A race's buyers, run by the race runner (``manage.py run_races``), never by a web
worker.

Every buyer buys one unit from every strategy's product, and the purchases go out
interleaved (buyer 1 at each product, then buyer 2 at each, ...) from ``concurrency``
threads, so that each strategy meets the same crowd at the same moment. They go
through the stack's own nginx (``FLASHSALE_RACE_TARGET``), never anywhere a request
names. Every ``TICK_S`` the runner reads each product's stock where its sale keeps it
(the stock rows; Redis for the gate), renews the race's lease, and writes the race
down; at the end each column takes its figures from its product's audit. With
``FLASHSALE_RACE_HISTORIES`` set, every purchase is recorded, and the race's history
(the resets, every try, the final read) is written there as ``race-<id>.jsonl``.

In a race with a waiting room, a buyer first asks each product's room for its place,
as the product page does: all of them at the start, then each again when its poll
is due (sooner as its turn nears) until the room admits it; then it buys with its
admission. A buyer waiting takes no thread: the threads take the new buyers first,
then the asks that are due.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import requests
from django.conf import settings
from django.db import DatabaseError, connections, transaction
from redis.exceptions import LockError, RedisError

from buyers.services import buyers_make
from common.history import Recorder
from common.strategies import strategy_get
from orders.figures import percentile
from orders.selectors import SaleAudit, order_keys, sale_audit
from orders.sellers import seller_of
from waitingroom.selectors import room_counts

from .services import now_iso, race_end, race_lease, race_save

logger = logging.getLogger(__name__)

RACER_PREFIX = "racer-"  # buyer n of a race is racer-<n>
TICK_S = 0.2  # how often the race is written down (the page reads it 4 times a second)
REQUEST_TIMEOUT_S = 30.0
# A waiting buyer asks again after half its estimated wait, within these bounds: often
# enough near its turn (a race's rooms are small), and never FLASHSALE_ROOM_ABANDON_S
# late for the ask the room told it to make (its place is kept).
POLL_S = (0.5, 4.0)
ASK_TRIES = 5  # asks in a row without an answer to read before a buyer gives up (an error)


@dataclass
class _Lane:
    """What one strategy's buyers heard so far."""

    strategy: str
    sku: str
    stock: int
    orders: int = 0
    sold_out: int = 0
    busy: int = 0
    errors: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    last_order_s: float | None = None  # since the start, when its last 201 came back
    series: list[list[float]] = field(default_factory=list)  # [seconds, orders] per tick
    room_series: list[list[float]] = field(default_factory=list)  # [seconds, waiting, admitted] per tick

    def heard(self, status: int, error: str | None, latency_ms: float, at_s: float) -> None:
        self.latencies_ms.append(latency_ms)
        if status == 201:
            self.orders += 1
            self.last_order_s = at_s
        elif status == 409 and error == "sold_out":
            self.sold_out += 1
        elif status == 503:
            self.busy += 1
        else:
            self.errors += 1

    def admitted_per_s(self) -> float | None:
        """Admissions a second over the last second of ticks (None before a second's worth);
        the room is empty at the start, before the first tick."""
        if not self.room_series or self.room_series[-1][0] < 1.0:
            return None
        now, _, admitted = self.room_series[-1]
        then = next((tick for tick in reversed(self.room_series) if tick[0] <= now - 1.0), (0.0, 0, 0))
        return round((admitted - then[2]) / (now - then[0]), 1)


class RaceRun:
    """One race, from its queued document to its final one."""

    def __init__(self, race: dict, *, target: str, stop: threading.Event | None = None,
                 beat: Callable[[], None] = lambda: None):
        self.race = race
        self.target = target.rstrip("/")
        self.stop = stop or threading.Event()
        self.beat = beat  # called at every tick: the runner's loop is alive through a race
        self.lanes = [_Lane(lane["strategy"], lane["sku"], lane["stock"]) for lane in race["lanes"]]
        self._mutex = threading.Lock()
        self._turn = threading.Condition(self._mutex)  # a poll came due, or a waiting buyer is done
        # The next purchase to send, so also how many were: buyer n // lanes at lane n % lanes.
        self._next = 0
        self.room = race.get("room") is not None
        self._polls: list[tuple[float, int]] = []  # (when, n): the waiting buyers' next asks
        self._waiting = 0  # buyers in a room and not yet done (polls due or in a thread's hands)
        self._ask_failures: dict[int, int] = {}  # n -> asks in a row without an answer
        self.answered = 0
        self.started = 0.0
        self.lease = race_lease(race["id"])
        self.history = Recorder() if settings.FLASHSALE_RACE_HISTORIES else None
        self.tokens: dict[str, str] | None = None  # racer -> bearer token, made as the race starts

    # --- the buyers --------------------------------------------------------------

    def _take(self) -> int | None:
        """The next buyer to go on with: a new one (the crowd arrives at once), unless a
        waiting buyer's ask is late by ``POLL_S[1]`` (its place must not look abandoned);
        else a waiting buyer whose ask is due; None once every buyer is done, or the
        race stops."""
        with self._turn:
            while not self.stop.is_set():
                now = time.monotonic()
                if self._polls and self._polls[0][0] <= now - POLL_S[1]:
                    return heapq.heappop(self._polls)[1]
                if self._next < self.race["total"]:
                    self._next += 1
                    if self.room:
                        self._waiting += 1
                    return self._next - 1
                if self._polls and self._polls[0][0] <= now:
                    return heapq.heappop(self._polls)[1]
                if not self._waiting:
                    return None
                # Woken by a poll put back or a buyer done; a stop is seen within a tick.
                self._turn.wait(timeout=min(self._polls[0][0] - now, TICK_S) if self._polls else TICK_S)
            return None

    def _later(self, n: int, after_s: float) -> None:
        with self._turn:
            heapq.heappush(self._polls, (time.monotonic() + after_s, n))
            self._turn.notify()

    def _done_waiting(self) -> None:
        with self._turn:
            self._waiting -= 1
            self._turn.notify_all()  # the last one ends the waits of every thread

    def _buyer(self) -> None:
        session = requests.Session()  # one keep-alive connection per thread
        while (n := self._take()) is not None:
            lane = self.lanes[n % len(self.lanes)]
            buyer = f"{RACER_PREFIX}{n // len(self.lanes)}"
            if self.room:
                self._in_room(session, n, lane, buyer)
            else:
                self._purchase(session, lane, buyer)

    def _in_room(self, session: requests.Session, n: int, lane: _Lane, buyer: str) -> None:
        """One ask of ``buyer``'s: while it waits its next ask is put off; admitted, it buys."""
        place = self._ask(session, lane, buyer)
        if place is None:  # nothing to read: asked again, ASK_TRIES times in a row at most
            failures = self._ask_failures[n] = self._ask_failures.get(n, 0) + 1
            if failures < ASK_TRIES:
                self._later(n, POLL_S[1])
                return
        elif place["state"] == "waiting":
            self._ask_failures.pop(n, None)
            self._later(n, min(max((place["wait_s"] or 0) / 2, POLL_S[0]), POLL_S[1]))
            return
        if place is not None and place["state"] == "admitted":
            self._purchase(session, lane, buyer, admission=place["admission"])
        else:  # no answer ASK_TRIES times, no place to be had, or bought already
            with self._mutex:
                lane.errors += 1
                self.answered += 1
        self._done_waiting()

    def _auth(self, buyer: str, body: dict, headers: dict) -> None:
        if self.tokens is None:
            body["user_id"] = buyer
        else:
            headers["Authorization"] = f"Bearer {self.tokens[buyer]}"

    def _ask(self, session: requests.Session, lane: _Lane, buyer: str) -> dict | None:
        """``buyer``'s place in ``lane``'s waiting room; None: no place to read (a
        busy or failed answer, asked again; or, as a 409, none to be had)."""
        body: dict[str, object] = {}
        headers: dict[str, str] = {}
        self._auth(buyer, body, headers)
        try:
            response = session.post(f"{self.target}/api/products/{lane.sku}/room", json=body,
                                    headers=headers, timeout=REQUEST_TIMEOUT_S)
            if response.status_code == 409:  # its address took its places: none, ever
                return {"state": "bounded"}
            return response.json() if response.status_code == 200 else None
        except (requests.RequestException, ValueError):
            return None

    def _purchase(self, session: requests.Session, lane: _Lane, buyer: str,
                  admission: str | None = None) -> None:
        url = f"{self.target}/api/orders"
        body = {"sku": lane.sku, "quantity": 1}
        key = uuid.uuid4().hex
        headers = {"Idempotency-Key": key}
        self._auth(buyer, body, headers)
        if admission is not None:
            headers["Admission"] = admission
        history = self.history
        op = history.invoke(buyer, lane.sku, 1, key) if history else None
        sent = time.perf_counter()
        try:
            response = session.post(url, json=body, headers=headers, timeout=REQUEST_TIMEOUT_S)
            status = response.status_code
            try:
                answer = response.json()
            except ValueError:
                answer = {}
            error = answer.get("error") if status == 409 and isinstance(answer, dict) else None
            if op and history:
                op.answered(status, answer if isinstance(answer, dict) else {}, history.now())
        except requests.RequestException as e:
            status, error = 0, None
            if op and history:
                op.unanswered(history.now(), type(e).__name__)
        done = time.perf_counter()
        with self._mutex:
            lane.heard(status, error, (done - sent) * 1000, done - self.started)
            self.answered += 1

    # --- the race ----------------------------------------------------------------

    def run(self) -> dict:
        """Send every buyer, writing the race down each tick; then the audits."""
        # The runner lives long, between races: a connection the database dropped
        # meanwhile (a restart) is replaced now, not found dead mid-race.
        connections.close_all()
        # The buyers are accounts, each buying with its bearer token, when the apps
        # take the buyer from credentials; made before the start, not inside it.
        try:
            buyers = -(-self.race["total"] // len(self.lanes))
            self.tokens = (dict(buyers_make(count=buyers, prefix=RACER_PREFIX))
                           if settings.FLASHSALE_BUYER_AUTH else None)
        except DatabaseError:
            logger.exception("race %s: its buyers could not be made", self.race["id"])
            race_end(self.race, status="failed",
                     error="the runner could not make the race's buyers (the database failed)")
            return self.race
        self.race.update(status="running", started_at=now_iso())
        if self.history:
            for lane in self.lanes:
                self.history.reset(lane.sku, lane.stock)
        self.started = time.perf_counter()
        threads = [threading.Thread(target=self._buyer, name=f"racer-{i}", daemon=True)
                   for i in range(min(self.race["concurrency"], self.race["total"]))]
        for thread in threads:
            thread.start()
        try:
            tick = time.monotonic()
            while any(thread.is_alive() for thread in threads):
                # On a schedule, not TICK_S after the last write: the write itself waits
                # for the GIL behind the buyers' threads.
                tick = max(tick + TICK_S, time.monotonic())
                time.sleep(max(0.0, tick - time.monotonic()))
                self._renew()
                self._write_down()
                self.beat()
            for thread in threads:
                thread.join()
            if self.stop.is_set():
                raise RaceStopped("the race runner was stopped before every buyer was sent")
            self._write_down()
            self._final()
        except RaceStopped as e:
            self._buyers_stopped(threads)
            race_end(self.race, status="abandoned" if e.lapsed else "failed", error=str(e))
            return self.race
        except Exception as e:
            self._buyers_stopped(threads)
            logger.exception("race %s failed", self.race["id"])
            # The race is public: what failed underneath (hosts, ports) stays in the log.
            race_end(self.race, status="failed",
                     error=f"the runner failed ({type(e).__name__}); the operator's log has the details")
            return self.race
        race_end(self.race, status="finished")
        return self.race

    def _buyers_stopped(self, threads: list[threading.Thread]) -> None:
        """Stop the buyers and wait for them: each finishes the request in hand. A race
        that says it ended has no purchase on its way, so the next race's reset meets none."""
        self.stop.set()
        for thread in threads:
            thread.join(timeout=REQUEST_TIMEOUT_S)

    def _renew(self) -> None:
        try:
            self.lease.reacquire()
        except LockError as e:
            # It lapsed (this process stalled past it): another race may be running
            # now, so these buyers must stop.
            raise RaceStopped("the race's lease lapsed before it was over", lapsed=True) from e

    def _write_down(self) -> None:
        elapsed = time.perf_counter() - self.started
        with self._mutex:
            counts = [(lane, lane.orders, lane.sold_out, lane.busy, lane.errors) for lane in self.lanes]
            self.race.update(sent=self._next, answered=self.answered, elapsed_s=round(elapsed, 3))
        for doc, (lane, orders, sold_out, busy, errors) in zip(self.race["lanes"], counts, strict=True):
            try:
                remaining = _stock_left(lane)
                room = room_counts(sku=lane.sku) if self.room else None
            except (DatabaseError, RedisError) as e:
                # A figure to show, not the verdict: the last one stays until the
                # server is back (the audit at the end has the last word).
                logger.warning("race %s: %s's stock unreadable: %s", self.race["id"], lane.strategy, e)
                transaction.get_connection().close()  # the next read connects anew
                remaining, room = doc["remaining"], None
            lane.series.append([round(elapsed, 2), orders])
            if room is not None:
                lane.room_series.append([round(elapsed, 2), room.waiting, room.admitted])
                doc["room"] = {"waiting": room.waiting, "admitted": room.admitted,
                               "admitted_per_s": lane.admitted_per_s(), "series": lane.room_series}
            # As far as the answers so far tell: the audit at the end has the last word.
            doc.update(remaining=remaining, orders=orders, sold_out=sold_out, busy=busy, errors=errors,
                       oversold=max(0, orders - lane.stock),
                       lost_updates=max(0, orders - (lane.stock - remaining)), series=lane.series)
        race_save(self.race)

    def _final(self) -> None:
        for doc, lane in zip(self.race["lanes"], self.lanes, strict=True):
            audit = _audit_settled(lane.sku)
            doc.update(orders=audit.orders, remaining=audit.remaining, oversold=audit.oversold,
                       lost_updates=audit.lost_updates, consistent=audit.consistent,
                       verdict=verdict(audit), **latency_figures(lane))
            if self.history:
                self.history.final(lane.sku, audit.remaining, order_keys(sku=lane.sku))
        self.race["elapsed_s"] = round(time.perf_counter() - self.started, 3)
        if self.history:
            self.history.write(Path(settings.FLASHSALE_RACE_HISTORIES) / f"race-{self.race['id']}.jsonl")


class RaceStopped(Exception):  # noqa: N818 (an ending, not an error of the runner's)
    def __init__(self, message: str, *, lapsed: bool = False):
        super().__init__(message)
        self.lapsed = lapsed


def _stock_left(lane: _Lane) -> int:
    """What the product's sale has left now, where its seller keeps it."""
    return seller_of(strategy_get(lane.strategy)).stock_left(lane.sku)


# How long the end of a race waits for the gate's persisters to write what it accepted.
SETTLE_S = 30.0


def _audit_settled(sku: str) -> SaleAudit:
    """The product's audit, once nothing it sold waits to be written (the gate's
    backlog), or after ``SETTLE_S``."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        audit = sale_audit(sku=sku)
        if audit.gate is None or not audit.gate.backlog or time.monotonic() >= deadline:
            return audit
        time.sleep(0.05)


def verdict(audit: SaleAudit) -> str:
    """A column's last word: ``held``, or how it broke."""
    if audit.oversold > 0:
        return f"oversold by {audit.oversold}"
    if audit.lost_updates > 0:
        return f"lost {audit.lost_updates} updates"
    return "held" if audit.consistent else "ledger inconsistent"


def latency_figures(lane: _Lane) -> dict:
    """Orders per second (from the start to the lane's last order: how fast it sold)
    and the p50/p99 (nearest rank) of every answer it got, in ms."""
    rate = lane.orders / lane.last_order_s if lane.orders and lane.last_order_s else None

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 1)

    return {"orders_per_s": rounded(rate), "p50_ms": rounded(percentile(lane.latencies_ms, 50)),
            "p99_ms": rounded(percentile(lane.latencies_ms, 99))}
