"""Buyers in a flash sale, for Locust.

    locust -f loadtest/locustfile.py --headless -u 200 -r 200 -H http://127.0.0.1:8080 \\
        --sku demo-1 --attempts 1000 --retry-share 0.1 --summary-json run.json

Each simulated buyer has its own user_id and asks again as soon as it is answered,
each purchase with a fresh Idempotency-Key; a share of purchases is sent a second
time with the same key, as a client or gateway retry would. The run stops after
``--attempts`` requests (retries included), or with ``--seconds`` once that window
has passed since the first request (the requests in flight are answered and
counted). ``--skus N`` spreads the buyers over ``<sku>-0`` … ``<sku>-N-1`` (buyer b
buys ``<sku>-(b mod N)``): with N = users nobody waits for anybody.
``--endpoint ping`` sends the same load to ``/api/ping`` instead: the ceiling of
nginx + gunicorn + Django on this machine.

Sold out and replays are expected answers; 503 busy, other statuses and malformed
bodies are failures. Every attempt's timing and outcome is written to
``--summary-json`` for ``loadtest.compare`` to turn into figures.
"""

from __future__ import annotations

import itertools
import json
import random
import time
import uuid

import gevent
from locust import FastHttpUser, constant, events, task
from locust.exception import StopUser

from loadtest.figures import server_timing

_buyer_ids = itertools.count(1)
# Locust snapshots its --csv stats every second and not again at exit: wait that
# long after the last answer so the CSV holds the final figures.
CSV_SETTLE_SECONDS = 1.2


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
    parser.add_argument("--endpoint", choices=["purchase", "ping"], default="purchase")
    parser.add_argument("--summary-json", default="", help="write every attempt's outcome here")


class Tally:
    """Tickets for the attempts (a fixed number, or as many as fit in a window),
    and what each attempt got."""

    def __init__(self):
        self.limit = 0
        self.issued = 0
        self.window = 0.0
        self.deadline: float | None = None
        self.environment = None
        # (start, end, outcome, lock wait ms, hold ms, arrival); the last three from
        # the answer's Server-Timing header, None where it had none (arrival: when
        # the request reached the app, epoch seconds, one clock for all instances).
        self.attempts: list[tuple[float, float, str, float | None, float | None, float | None]] = []

    def take_ticket(self) -> bool:
        if self.window and self.deadline is None:
            self.deadline = time.monotonic() + self.window
        if self.deadline is not None and time.monotonic() >= self.deadline:
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
            gevent.spawn_later(CSV_SETTLE_SECONDS, runner.quit)  # the last answer is in


tally = Tally()


@events.test_start.add_listener
def _start(environment, **kwargs):
    tally.limit = environment.parsed_options.attempts
    tally.window = environment.parsed_options.seconds
    tally.environment = environment
    gevent.spawn(_progress, environment)


def _progress(environment):
    started, last = time.monotonic(), 0
    while len(tally.attempts) < tally.limit:
        gevent.sleep(1)
        done = len(tally.attempts)
        created = sum(1 for a in tally.attempts if a[2] == "created")
        limit, window = ("", f" of {tally.window:g}") if tally.window else (f"/{tally.limit}", "")
        print(f"    {done}{limit} answered, {done - last} req/s now, {created} orders, "
              f"{time.monotonic() - started:.0f}s{window}", flush=True)
        last = done


@events.quitting.add_listener
def _write_summary(environment, **kwargs):
    path = environment.parsed_options.summary_json
    if path:
        with open(path, "w") as out:
            json.dump({"options": {"sku": environment.parsed_options.sku,
                                   "endpoint": environment.parsed_options.endpoint,
                                   "attempts": tally.limit},
                       "seconds": tally.window, "skus": environment.parsed_options.skus,
                       "attempts": tally.attempts}, out)


def classify(status: int, body: dict | None) -> str:
    """What an answer means: created, replayed, sold_out, conflict, busy or error."""
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
    return "error"


class Buyer(FastHttpUser):
    wait_time = constant(0)  # a flash sale: ask again the moment you are answered

    def on_start(self):
        number = next(_buyer_ids)
        self.user_id = f"buyer-{number}"
        self.options = self.environment.parsed_options
        skus = self.options.skus
        self.sku = self.options.sku if skus <= 1 else f"{self.options.sku}-{number % skus}"

    @task
    def buy(self):
        if self.options.endpoint == "ping":
            self._ping()
            return
        key = uuid.uuid4().hex
        self._purchase(key, name="purchase")
        if random.random() < self.options.retry_share:
            self._purchase(key, name="purchase (retried key)")

    def _purchase(self, key: str, *, name: str) -> None:
        if not tally.take_ticket():
            raise StopUser()
        start = time.time()
        with self.client.post("/api/orders", name=name, catch_response=True,
                              json={"sku": self.sku, "quantity": 1, "user_id": self.user_id},
                              headers={"Idempotency-Key": key}) as response:
            try:
                body = response.json()
            except Exception:  # not JSON at all: a failure like any other
                body = None
            outcome = classify(response.status_code, body if isinstance(body, dict) else None)
            if outcome in ("created", "replayed", "sold_out"):
                response.success()
            else:
                response.failure(f"{response.status_code} {outcome}")
            timing = server_timing(response.headers.get("Server-Timing"))
        tally.record(start, time.time(), outcome, timing)

    def _ping(self) -> None:
        if not tally.take_ticket():
            raise StopUser()
        start = time.time()
        with self.client.get("/api/ping", name="ping", catch_response=True) as response:
            ok = response.status_code == 200
            if not ok:
                response.failure(f"{response.status_code}")
        tally.record(start, time.time(), "ping" if ok else "error", {})
