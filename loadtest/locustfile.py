"""Buyers in a flash sale, for Locust.

    locust -f loadtest/locustfile.py --headless -u 200 -r 200 -H http://127.0.0.1:8080 \\
        --sku demo-1 --attempts 1000 --retry-share 0.1 --summary-json run.json

Each simulated buyer has its own user_id (with ``--tokens``, its own account and
bearer token) and asks again as soon as it is answered, each purchase with a fresh
Idempotency-Key; a share of purchases is sent a second time with the same key, as a
client or gateway retry would. The run stops after
``--attempts`` requests (retries included), or with ``--seconds`` once that window
has passed since the first request (the requests in flight are answered and
counted). ``--skus N`` spreads the buyers over ``<sku>-0`` … ``<sku>-N-1`` (buyer b
buys ``<sku>-(b mod N)``): with N = users nobody waits for anybody.
``--endpoint ping`` sends the same load to ``/api/ping`` instead: the ceiling of
nginx + gunicorn + Django on this machine.

``--endpoint opening`` is the herd at a sale's opening second: each buyer loads the
product page, reads the sale's ``starts_at`` and the server's clock from it (nginx's
``Server-Timing: now``), refreshes the page every ``--refresh-ms`` (give or take
half) until the opening, and then buys at once; a 503 busy is pressed again (up to
``OPENING_PRESSES`` times), any other answer ends the buyer. The run ends when every
buyer has ended.

``--endpoint opening-room`` is the same crowd at a sale with a waiting room: each
buyer loads the product page once, then asks the room for its place (a place in the
order it came) and asks again every ``--refresh-ms`` (give or take half) until the
room admits it, and then buys with its admission; a 503 busy is pressed again, any
other answer ends the buyer.

``--endpoint payment`` is a sale with a payment window: each buyer buys until it has
one order (a sold-out answer is asked again every ``SOLD_OUT_PAUSE`` seconds: unpaid
units come back), then pays for it and follows the order until the provider's
webhook settles it (a payment that came too late is refunded, and the buyer buys
again), or, for a share ``1 - --pay-ratio`` of the buyers, never pays; then it is
done. The run ends when every buyer is done,
once ``--seconds`` have passed, or once ``--stop-file`` exists (the runner makes it
when every unit is paid).

``--endpoint open`` is an open crowd: each buyer arrives once, at a time fixed
before the run (``loadtest.arrivals``: ``--rate`` a second, or with no rate in the
shape of an opening), from ``--open-at`` on, buys once and is done, whether or not
the buyers before it were answered. Its latency counts from that scheduled arrival,
not from when the request left: a client that falls behind its schedule, or a
server that stalls, shows in the figures. Run it with as many users as
``--arrivals``: each user is one buyer.

Distributed (``--processes N`` on one machine, or ``--master`` and ``--worker``
processes on several), the run is the same run: the master hands each worker an even
share of ``--attempts`` and of the buyers' numbers, each worker sends every attempt
it recorded to the master once its share is answered, and the master quits once
its statistics count every request the workers reported, and writes the one
``--summary-json``: the samples themselves, so percentiles merge exactly.

Sold out and replays are expected answers; 503 busy, other statuses and malformed
bodies are failures. Every attempt's timing and outcome is written to
``--summary-json`` for ``loadtest.compare`` to turn into figures.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import time
import uuid
from datetime import datetime
from pathlib import Path

import gevent
from locust import FastHttpUser, constant, events, task
from locust.exception import StopUser
from locust.runners import MasterRunner, WorkerRunner

from common.history import Recorder
from loadtest.arrivals import arrival_offset
from loadtest.figures import OPENING_PRESSES, server_timing

_buyer_ids = itertools.count(1)
# Locust snapshots its --csv stats every second and not again at exit: wait that
# long after the last answer so the CSV holds the final figures.
CSV_SETTLE_SECONDS = 1.2
# Payment mode: how long a buyer told "sold out" waits before it asks again, and how
# often it tries a payment answered 503.
SOLD_OUT_PAUSE = 0.25
PAY_TRIES = 20
FOLLOW_EVERY = 1.0  # seconds between two looks at an order waiting for its webhook
FOLLOW_TRIES = 60
# Distributed: the message a worker sends the master with every attempt it recorded,
# and how long the master waits for the workers' statistics to catch up with them
# (a worker reports them every 3 s).
TALLY_MESSAGE = "flashsale-tally"
STATS_CATCH_UP_SECONDS = 15.0
# Open mode without --open-at: the first arrival this long after the run starts,
# once every user has been started.
OPEN_LEAD_SECONDS = 2.0


@events.init_command_line_parser.add_listener
def _arguments(parser):
    parser.add_argument("--sku", default="demo-1", help="product to buy")
    parser.add_argument("--attempts", type=int, default=1000, help="stop after this many requests")
    parser.add_argument("--seconds", type=float, default=0,
                        help="stop sending this long after the first request (0: no window)")
    parser.add_argument("--skus", type=int, default=1,
                        help="spread the buyers over this many products named <sku>-<n>")
    parser.add_argument("--retry-share", type=float, default=0.1,
                        help="share of purchases sent again with the same Idempotency-Key")
    parser.add_argument("--endpoint", default="purchase",
                        choices=["purchase", "ping", "opening", "opening-room", "payment", "open"])
    parser.add_argument("--arrivals", type=int, default=0, help="open: the buyers, each arriving once")
    parser.add_argument("--rate", type=float, default=0,
                        help="open: buyers arriving a second (0: in the shape of an opening)")
    parser.add_argument("--half-life", type=float, default=1.0,
                        help="open, an opening's shape: seconds in which its arrivals halve after the peak")
    parser.add_argument("--open-at", type=float, default=0,
                        help="open: when the first buyer arrives, epoch seconds (0: two seconds after "
                             "the start)")
    parser.add_argument("--stop-file", default="",
                        help="stop sending once this file exists (the runner's: the sale is done)")
    parser.add_argument("--pay-ratio", type=float, default=1.0,
                        help="payment: the share of buyers who pay for their order (the rest never do)")
    parser.add_argument("--refresh-ms", type=float, default=500,
                        help="opening: how often a waiting buyer reloads the product page (or, with a "
                             "waiting room, asks the room)")
    parser.add_argument("--tokens", default="", help="buyers signed in: a `manage.py buyers_make` file "
                        "(name, a tab, token: a line each), buyer n buying as its n-th line")
    parser.add_argument("--summary-json", default="", help="write every attempt's outcome here")
    # Set by the master as a run starts, for its workers: the workers' indexes, the
    # order of their shares.
    parser.add_argument("--shares", default="", include_in_web_ui=False, help=argparse.SUPPRESS)
    parser.add_argument("--history", default="", help="record every purchase's invocation, completion "
                        "and answer here (common.history's JSON lines; the runner adds the reset and "
                        "the final read)")


class Tally:
    """Tickets for the attempts (a fixed number, or as many as fit in a window),
    and what each attempt got."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        """Nothing issued, nothing recorded: each run starts here (a worker, or a master
        behind Locust's web page, runs one after another in one process)."""
        self.limit = 0
        self.issued = 0
        self.window = 0.0
        self.deadline: float | None = None
        self.stop_file: Path | None = None
        self.environment = None
        # (start, end, outcome, lock wait ms, hold ms, arrival); the last three from
        # the answer's Server-Timing header, None where it had none (arrival: when
        # the request reached the app, epoch seconds, one clock for all instances).
        self.attempts: list[tuple[float, float, str, float | None, float | None, float | None]] = []
        # Opening mode: the product page's reads (start, end, ok; with a waiting room,
        # the room's asks too), the opening (epoch seconds, the server's clock) and how
        # many buyers have ended.
        self.reads: list[tuple[float, float, bool]] = []
        # Opening mode: each buyer's arrival (its first request's start) and whether it
        # got an order: who came first against who was served.
        self.arrivals: dict[str, list] = {}
        self.opens_at: float | None = None
        self.ended = 0
        # Payment mode: each payment asked for (start, end, HTTP status).
        self.payments: list[tuple[float, float, int]] = []
        # Open mode: how late each purchase left, after its buyer's scheduled arrival (s).
        self.late: list[float] = []
        self.started = 0.0  # when this process's run started, epoch seconds

    def buyer_ended(self) -> None:
        """An opening-second buyer is done; once all are, no more tickets."""
        self.ended += 1
        # This process's buyers: every buyer in one process, its share on a worker.
        if self.environment and self.ended >= self.environment.runner.target_user_count:
            self.limit = self.issued
            self._quit_when_all_answered()

    def take_ticket(self) -> bool:
        if self.window and self.deadline is None:
            self.deadline = time.monotonic() + self.window
        stopped = self.stop_file is not None and self.stop_file.exists()
        if stopped or self.deadline is not None and time.monotonic() >= self.deadline:
            self.limit = self.issued  # the window is over: no more tickets
            self._quit_when_all_answered()
        if self.issued >= self.limit:
            return False
        self.issued += 1
        return True

    def record(self, start: float, end: float, outcome: str, timing: dict[str, float]) -> None:
        self.attempts.append((start, end, outcome, timing.get("lock-wait"), timing.get("hold"),
                              timing.get("arrival")))
        self._quit_when_all_answered()

    def _quit_when_all_answered(self) -> None:
        runner = self.environment.runner if self.environment else None
        if len(self.attempts) == self.limit and runner is not None:
            self.environment = None  # quit once
            if isinstance(runner, WorkerRunner):  # the master quits, once every worker's share is in
                print(f"    worker {place.index + 1}/{place.count}: its share answered, "
                      f"{len(self.attempts)} of {self.limit}; sent to the master", flush=True)
                runner.send_message(TALLY_MESSAGE, self.sent())
            else:
                gevent.spawn_later(CSV_SETTLE_SECONDS, runner.quit)  # the last answer is in

    def sent(self) -> dict:
        """What a worker tells the master at its end: every sample, and how many
        requests they are (the master's statistics must count as many: a worker's own
        count only what it has not yet reported)."""
        requests = len(self.attempts) + len(self.reads) + len(self.payments)
        return {"limit": self.limit, "attempts": self.attempts, "reads": self.reads,
                "arrivals": self.arrivals, "opens_at": self.opens_at,
                "payments": self.payments, "late": self.late, "requests": requests}

    def received(self, sent: dict) -> None:
        """The master: one worker's samples added to the run's."""
        self.limit += sent["limit"]
        self.attempts.extend(tuple(a) for a in sent["attempts"])
        self.reads.extend(tuple(r) for r in sent["reads"])
        self.arrivals.update(sent["arrivals"])  # by buyer: no two workers share one
        self.payments.extend(tuple(p) for p in sent["payments"])
        self.late.extend(sent["late"])
        self.opens_at = self.opens_at if sent["opens_at"] is None else sent["opens_at"]


class Place:
    """Where this process's buyers sit among every worker's: a worker's position in
    the master's list of shares and their count (alone: 0 of 1). Its share of a total
    is even; its n-th buyer is the run's ``(n - 1) * count + index + 1``-th, so that
    one process numbers its buyers as ever and workers never share a number."""

    def __init__(self) -> None:
        self.index, self.count = 0, 1

    def share(self, total: int) -> int:
        return total // self.count + (self.index < total % self.count)

    def number(self, local: int) -> int:
        return (local - 1) * self.count + self.index + 1


tally = Tally()
place = Place()
recorder = Recorder()  # every purchase, when --history asks for it
buyers: list[tuple[str, str]] = []  # (name, bearer token) with --tokens
# The master: how many workers' samples it waits for, and how many requests they counted.
workers_reported: list[int] = []


@events.init.add_listener
def _on_init(environment, **kwargs):
    if isinstance(environment.runner, MasterRunner):
        environment.runner.register_message(TALLY_MESSAGE, _tally_received)


def _tally_received(environment, msg, **kwargs):
    tally.received(msg.data)
    workers_reported.append(msg.data["requests"])
    if len(workers_reported) == len(environment.parsed_options.shares.split(",")):
        gevent.spawn(_end_once_counted, environment, sum(workers_reported))


def _end_once_counted(environment, requests: int) -> None:
    """The master ends the run once its statistics hold every request the workers
    counted (and its CSV has been written since), or after a while if a worker's never
    come: headless, it quits (and writes the summary as it does); behind the web page,
    it writes the summary and stops, ready for the next run."""
    runner = environment.runner
    deadline = time.monotonic() + STATS_CATCH_UP_SECONDS
    while runner.stats.total.num_requests < requests and time.monotonic() < deadline:
        gevent.sleep(0.2)
    gevent.sleep(CSV_SETTLE_SECONDS)
    if environment.parsed_options.headless:
        runner.quit()
    else:
        _write_summary(environment)
        runner.stop()


@events.test_start.add_listener
def _start(environment, **kwargs):
    global _buyer_ids
    runner, options = environment.runner, environment.parsed_options
    tally.reset()
    workers_reported.clear()
    buyers.clear()
    _buyer_ids = itertools.count(1)
    if isinstance(runner, MasterRunner):
        # Sent to the workers with the spawn jobs that follow this event.
        options.shares = ",".join(str(runner.get_worker_index(worker.id)) for worker in sorted(
            runner.clients.ready + runner.clients.running + runner.clients.spawning,
            key=lambda worker: runner.get_worker_index(worker.id)))
        return
    if isinstance(runner, WorkerRunner):
        shares = options.shares.split(",")
        place.index, place.count = shares.index(str(runner.worker_index)), len(shares)
    tally.limit = place.share(options.attempts)
    tally.window = options.seconds
    tally.started = time.time()
    tally.environment = environment
    if environment.parsed_options.stop_file:
        tally.stop_file = Path(environment.parsed_options.stop_file)
    if environment.parsed_options.tokens:
        lines = Path(environment.parsed_options.tokens).read_text().splitlines()
        buyers.extend(tuple(line.split("\t", 1)) for line in lines)
    gevent.spawn(_progress, environment)


def _progress(environment):
    started, last = time.monotonic(), 0
    while len(tally.attempts) < tally.limit:
        gevent.sleep(1)
        done = len(tally.attempts)
        created = sum(1 for a in tally.attempts if a[2] == "created")
        limit, window = ("", f" of {tally.window:g}") if tally.window else (f"/{tally.limit}", "")
        worker = f"worker {place.index + 1}/{place.count}: " if place.count > 1 else ""
        print(f"    {worker}{done}{limit} answered, {done - last} req/s now, {created} orders, "
              f"{time.monotonic() - started:.0f}s{window}", flush=True)
        last = done


@events.quitting.add_listener
def _write_summary(environment, **kwargs):
    if isinstance(environment.runner, WorkerRunner):
        return  # its samples went to the master, which writes them
    if environment.parsed_options.history:
        recorder.write(Path(environment.parsed_options.history))
    path = environment.parsed_options.summary_json
    if path:
        with open(path, "w") as out:
            json.dump({"options": {"sku": environment.parsed_options.sku,
                                   "endpoint": environment.parsed_options.endpoint,
                                   "attempts": tally.limit},
                       "seconds": tally.window, "skus": environment.parsed_options.skus,
                       "attempts": tally.attempts, "reads": tally.reads, "opens_at": tally.opens_at,
                       "arrivals": list(tally.arrivals.values()),
                       "payments": tally.payments, "late": tally.late}, out)


def classify(status: int, body: dict | None) -> str:
    """What an answer means: created, replayed, sold_out, conflict, busy, early (the
    sale has not started) or error."""
    if body is None:
        return "error"
    if status == 201 and "order_id" in body:
        return "created"
    if status == 200 and "order_id" in body:
        return "replayed"
    if status == 409 and body.get("error") in ("sold_out", "idempotency_conflict"):
        return "sold_out" if body["error"] == "sold_out" else "conflict"
    if status == 503 and body.get("error") == "busy":
        return "busy"
    if status == 409 and body.get("error") == "not_started":
        return "early"
    return "error"


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


class Buyer(FastHttpUser):
    wait_time = constant(0)  # a flash sale: ask again the moment you are answered

    def on_start(self):
        self.number = number = place.number(next(_buyer_ids))
        self.user_id, self.token = f"buyer-{number}", None
        if buyers:
            self.user_id, self.token = buyers[(number - 1) % len(buyers)]
        self.options = self.environment.parsed_options
        skus = self.options.skus
        self.sku = self.options.sku if skus <= 1 else f"{self.options.sku}-{number % skus}"
        self.opens_at: float | None = None  # the sale's start, on this buyer's clock
        self.offset = 0.0  # how far the server's clock runs ahead of this one, seconds
        self.best_trip = float("inf")  # the shortest round trip of a page load so far
        self.presses = 0
        self.failed_reads = 0
        self.admission: str | None = None  # opening-room mode: the room's token, once admitted
        # Payment mode: whether this buyer pays; spread evenly over the buyers' numbers.
        self.payer = (number * 0.6180339887) % 1 < self.options.pay_ratio

    @task
    def buy(self):
        if self.options.endpoint == "ping":
            self._ping()
            return
        if self.options.endpoint == "opening":
            self._at_the_opening()
            return
        if self.options.endpoint == "opening-room":
            self._in_the_room()
            return
        if self.options.endpoint == "payment":
            self._pay_or_release()
            return
        if self.options.endpoint == "open":
            self._arrive()
            return
        key = uuid.uuid4().hex
        self._purchase(key, name="purchase")
        if random.random() < self.options.retry_share:
            self._purchase(key, name="purchase (retried key)")

    def _arrive(self) -> None:
        """Open mode: wait for this buyer's arrival, buy once, be done."""
        opens = self.options.open_at or tally.started + OPEN_LEAD_SECONDS
        scheduled = opens + arrival_offset(self.number - 1, self.options.arrivals, rate=self.options.rate,
                                           half_life=self.options.half_life)
        gevent.sleep(max(scheduled - time.time(), 0))
        self._purchase(uuid.uuid4().hex, name="purchase, open", scheduled=scheduled)
        self._end()

    def _at_the_opening(self) -> None:
        if self.opens_at is None or time.time() < self.opens_at:
            refresh = self.options.refresh_ms / 1000 * random.uniform(0.5, 1.5)
            if not self._read_page():
                self.failed_reads += 1
                if self.failed_reads >= OPENING_PRESSES:  # the page is down: give up
                    self._end()
                gevent.sleep(refresh)  # reload it in a while
            elif time.time() < self.opens_at:
                # Wake on the opening itself, or for the next refresh before it.
                gevent.sleep(min(self.opens_at - time.time(), refresh))
            return
        outcome, body = self._purchase(uuid.uuid4().hex, name="purchase at the opening")
        if outcome == "early":
            # Ahead of the server: the page this buyer read was older than the reset
            # (a cache), or its clock estimate was off. The answer says when; the page
            # is not asked again (it may still be the old one).
            self.opens_at = _epoch(body["starts_at"]) - self.offset
            gevent.sleep(max(self.opens_at - time.time(), 0))
            return
        self.presses += 1
        if outcome != "busy" or self.presses >= OPENING_PRESSES:
            self._end()

    def _in_the_room(self) -> None:
        if self.opens_at is None:
            if not self._read_page():
                self.failed_reads += 1
                if self.failed_reads >= OPENING_PRESSES:  # the page is down: give up
                    self._end()
                gevent.sleep(self.options.refresh_ms / 1000)
            return
        if self.admission is None:
            place = self._ask_room()
            if place is None or place["state"] == "waiting":
                gevent.sleep(self.options.refresh_ms / 1000 * random.uniform(0.5, 1.5))
                return
            if place["state"] != "admitted":  # used: this buyer bought already
                self._end()
            self.admission = place["admission"]
        outcome, _ = self._purchase(uuid.uuid4().hex, name="purchase, admitted", admission=self.admission)
        self.presses += 1
        if outcome != "busy" or self.presses >= OPENING_PRESSES:
            self._end()

    def _ask_room(self) -> dict | None:
        """The buyer's place in the sale's waiting room (None: no answer to read)."""
        start = time.time()
        body, headers = ({}, self._auth()) if self.token is not None else ({"user_id": self.user_id}, {})
        with self.client.post(f"/api/products/{self.sku}/room", name="waiting room", catch_response=True,
                              json=body, headers=headers) as response:
            try:
                place = response.json() if response.status_code == 200 else None
            except Exception:
                place = None
            if place is None:
                response.failure(f"{response.status_code}")
        self._arrived(start)
        tally.reads.append((start, time.time(), place is not None))
        if response.status_code == 409:  # this address took its places: no place, ever
            self._end()
        return place

    def _arrived(self, start: float) -> None:
        tally.arrivals.setdefault(self.user_id, [start, False])

    def _pay_or_release(self) -> None:
        outcome, body = self._purchase(uuid.uuid4().hex, name="purchase")
        if outcome == "sold_out":
            gevent.sleep(SOLD_OUT_PAUSE)  # unpaid units come back: ask again in a while
            return
        if outcome != "created":
            return  # busy or an error: ask again
        if self.payer and self._pay(body["order_id"]) and self._paid(body["order_id"]):
            self._end()
        elif not self.payer:
            self._end()
        # A payment that came too late (its order expired, its units sold again, the
        # money back): the buyer buys again.

    def _paid(self, order_id: int) -> bool:
        """Follow the order until the provider's webhook settled it: whether it is paid
        (not: it expired first and the payment was refunded, or no answer came)."""
        for _ in range(FOLLOW_TRIES):
            start = time.time()
            with self.client.get(f"/api/orders/{order_id}", name="order", catch_response=True,
                                 headers=self._auth()) as response:
                try:
                    status = response.json().get("payment_status") if response.status_code == 200 else None
                except Exception:
                    status = None
                if status is None:
                    response.failure(f"{response.status_code}")
            tally.payments.append((start, time.time(), response.status_code))
            if status not in ("pending", None):
                return status == "paid"
            gevent.sleep(FOLLOW_EVERY)
        return False

    def _auth(self) -> dict:
        return {} if self.token is None else {"Authorization": f"Bearer {self.token}"}

    def _pay(self, order_id: int) -> bool:
        """Pay, with one Idempotency-Key for every try: a 503 (the gate's order not in
        the database yet, a server away) is tried again, as a client would. Whether
        the provider took it (202)."""
        headers = {"Idempotency-Key": uuid.uuid4().hex, **self._auth()}
        for _ in range(PAY_TRIES):
            start = time.time()
            with self.client.post(f"/api/orders/{order_id}/pay", name="pay", catch_response=True,
                                  json={"payment_method": "pm_card_visa"}, headers=headers) as response:
                if response.status_code == 202:
                    response.success()
                else:
                    response.failure(f"{response.status_code}")
            tally.payments.append((start, time.time(), response.status_code))
            if response.status_code != 503:
                return response.status_code == 202
            gevent.sleep(SOLD_OUT_PAUSE / 5)
        return False

    def _end(self) -> None:
        tally.buyer_ended()
        raise StopUser()

    def _read_page(self) -> bool:
        """Load the product page: the sale's start and the server's clock, which set
        this buyer's ``opens_at`` on its own clock. Whether the page answered."""
        start = time.time()
        with self.client.get(f"/api/products/{self.sku}", name="product page",
                             catch_response=True) as response:
            end = time.time()
            try:
                starts_at = response.json()["starts_at"] if response.status_code == 200 else ""
            except Exception:  # not the product's JSON: a failure like any other
                starts_at = ""
            ok = starts_at != ""
            if not ok:
                response.failure(f"{response.status_code}")
            now = server_timing(response.headers.get("Server-Timing")).get("now")
        tally.reads.append((start, end, ok))
        self._arrived(start)
        if not ok:
            return False
        # The server's clock runs ``offset`` ahead of this one. Taken from the load with
        # the shortest round trip (Cristian's algorithm, as the page does): nginx stamps
        # its answer when it sends it, so a load that waited (for a cache fill) puts
        # the stamp near its end, not in the middle where the estimate assumes it.
        if now is not None and end - start < self.best_trip:
            self.best_trip = end - start
            self.offset = now - (start + end) / 2
        if starts_at is None:  # no window: on sale already
            self.opens_at = start
            return True
        tally.opens_at = _epoch(starts_at)
        self.opens_at = tally.opens_at - self.offset
        return True

    def _purchase(self, key: str, *, name: str, admission: str | None = None,
                  scheduled: float | None = None) -> tuple[str, dict | None]:
        """Buy one (with the waiting room's ``admission``, if given); the outcome
        (``classify``) and the answer's body. With ``scheduled`` (open mode), its
        latency counts from then."""
        if not tally.take_ticket():
            raise StopUser()
        op = recorder.invoke(self.user_id, self.sku, 1, key) if self.options.history else None
        start = time.time()
        if scheduled is not None:
            tally.late.append(max(start - scheduled, 0.0))
            start = scheduled
        body: dict = {"sku": self.sku, "quantity": 1}
        headers = {"Idempotency-Key": key}
        if self.token is None:
            body["user_id"] = self.user_id
        else:
            headers["Authorization"] = f"Bearer {self.token}"
        if admission is not None:
            headers["Admission"] = admission
        with self.client.post("/api/orders", name=name, catch_response=True, json=body,
                              headers=headers) as response:
            try:
                body = response.json()
            except Exception:  # not JSON at all: a failure like any other
                body = None
            if op is not None:
                if response.status_code:  # 0: no answer (refused, reset, timed out)
                    op.answered(response.status_code, body if isinstance(body, dict) else {}, recorder.now())
                else:
                    op.unanswered(recorder.now(), type(response.error).__name__)
            outcome = classify(response.status_code, body if isinstance(body, dict) else None)
            if outcome in ("created", "replayed", "sold_out"):
                response.success()
            else:
                response.failure(f"{response.status_code} {outcome}")
            timing = server_timing(response.headers.get("Server-Timing"))
        tally.record(start, time.time(), outcome, timing)
        if outcome == "created" and self.user_id in tally.arrivals:
            tally.arrivals[self.user_id][1] = True
        return outcome, body

    def _ping(self) -> None:
        if not tally.take_ticket():
            raise StopUser()
        start = time.time()
        with self.client.get("/api/ping", name="ping", catch_response=True) as response:
            ok = response.status_code == 200
            if not ok:
                response.failure(f"{response.status_code}")
        tally.record(start, time.time(), "ping" if ok else "error", {})
