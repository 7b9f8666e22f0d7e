"""One sale under one fault: buyers that retry as a careful client does, the fault
injected mid-sale, then the verdict read from the database itself.

A buyer sends one purchase with its own Idempotency-Key and retries it, with the
same key, on a connection error, 502, 503 and 504: 5 tries, backing off from 0.2 s
to 2 s. Its last answer is its *final answer*. The verdict:

- oversold, lost updates and the ledger, as the audit counts them;
- keys with two orders (the unique key should make it impossible);
- replays: every key that has an order, sent again, must get that order back;
- lies: final answers that are not true of the database at the end: a success for a
  key without that order, a refusal or an error for a key that has an order;
- the stall: the longest gap between consecutive orders while stock remained.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import requests

from common.history import Recorder
from loadtest.buyers import buyer_tokens
from loadtest.client import FlashsaleClient
from loadtest.truth import Truth
from stack.config import StackConfig
from stack.hosted import until_ready
from stack.servers import APP_DATABASE

from .faults import Fault

RETRIED = {0, 502, 503, 504}  # 0: no HTTP answer (connection refused, reset, timed out)
TRIES = 5
BACKOFF = (0.2, 2.0)  # first pause, longest pause; doubling between


@dataclass(frozen=True)
class DocumentedError:
    key: str
    user: str
    status: int  # the final answer's HTTP status; 0 when there was none
    error: str | None  # its "error" code, for a refusal
    order_id: int | None  # its order, for a success
    tries: int


@dataclass
class Verdict:
    strategy: str
    fault: str
    stock: int
    orders: int
    oversold: int
    lost_updates: int
    ledger_consistent: bool
    double_keys: int
    replays_wrong: int
    lies: int
    stall_seconds: float
    answers: Counter
    seconds: float
    injected: bool
    struck_at: float | None = None  # seconds into the sale the fault struck (it may be after its end)
    notes: list[str] = field(default_factory=list)

    @property
    def broken(self) -> list[str]:
        """The invariants this sale broke (empty: every answer true, nothing lost)."""
        checks = {"oversold": self.oversold, "lost updates": self.lost_updates,
                  "ledger": not self.ledger_consistent, "keys with two orders": self.double_keys,
                  "replays": self.replays_wrong, "lying answers": self.lies,
                  "fault not injected": not self.injected}
        return [name for name, bad in checks.items() if bad]


def _buy(client_now: Callable[[], FlashsaleClient], sku: str, key: str, user: str,
         history: Recorder | None) -> DocumentedError:
    """Buy with retries; ``client_now()`` says where each try goes."""
    pause = BACKOFF[0]
    for attempt in range(1, TRIES + 1):
        op = history.invoke(user, sku, 1, key) if history else None
        try:
            response = client_now().order(sku, 1, user, key=key)
            status = response.status_code
            body = response.json() if response.headers.get("Content-Type", "").startswith(
                "application/json") else {}
            if op:
                op.answered(status, body, history.now())
        except (requests.RequestException, ValueError) as e:
            status, body = 0, {}
            if op:
                op.unanswered(history.now(), type(e).__name__)
        if status not in RETRIED or attempt == TRIES:
            return DocumentedError(key, user, status, body.get("error"), body.get("order_id"), attempt)
        time.sleep(pause)
        pause = min(pause * 2, BACKOFF[1])
    raise AssertionError("unreachable")


def _stall(times: list[float], *, sold_out: bool, started: float, ended: float) -> float:
    """The longest stretch without an order while stock remained: from the start to
    the first order, between orders, and (unless it sold out) from the last to the end."""
    marks = [started, *times] + ([] if sold_out else [ended])
    return max((b - a for a, b in zip(marks, marks[1:], strict=False)), default=0.0)


def _until_healthy(config: StackConfig, seconds: float = 60, urls: list[str] | None = None) -> None:
    """Until /healthz through nginx says every backend the stack runs is ok, several times in a row
    (so on each instance of the round robin); with ``urls`` (instances on test hosts,
    no nginx), until each one's /readyz does."""
    if urls:
        for url in urls:
            until_ready(url, seconds)
        return
    client = FlashsaleClient(config.base_url, timeout=2)
    deadline = time.monotonic() + seconds
    in_a_row = 0
    while in_a_row < 2 * config.instances:
        if time.monotonic() > deadline:
            raise RuntimeError("the stack did not come back healthy within a minute")
        try:
            body = client.healthz()
            backends = body.get("backends") or {}
            healthy = bool(backends) and all(state == "ok" for state in backends.values())
        except (requests.RequestException, ValueError):
            healthy = False
        in_a_row = in_a_row + 1 if healthy else 0
        if not healthy:
            time.sleep(0.2)


BUYER_PREFIX = "chaos-buyer-"  # the n-th buyer of a sale is chaos-buyer-<n>


def sale_under_fault(config: StackConfig, *, strategy: str, fault: Fault | None, stock: int, buyers: int,
                     threads: int, trigger: int, history: Recorder | None = None,
                     urls: list[str] | None = None, first: str | None = None,
                     database: str = APP_DATABASE, signed_in: bool | None = None) -> Verdict:
    """One sale; ``fault`` None: none injected. ``history`` records every try and,
    after the sale has settled, its final read. ``urls``: the instances to buy from,
    buyer by buyer (default: the stack's nginx); ``first``: the one every try goes to
    until the fault strikes (so that it strikes that one holding the lock), the
    others taking every try after; ``database``: the one those instances write, on
    the stack's MariaDB, where the verdict reads the orders; ``signed_in``: whether
    those instances take the buyer from credentials (default: the stack's setting),
    and so each buyer (``BUYER_PREFIX<n>``) is an account made there, buying with its
    bearer token (``loadtest.buyers``)."""
    direct = urls  # instances reached without nginx: asked /readyz, not nginx's /healthz
    urls = urls or [config.base_url]
    others = [url for url in urls if url != first] or urls
    _until_healthy(config, urls=direct)
    admin = FlashsaleClient(urls[0], admin_token=config.admin_token())
    sku = f"chaos-{strategy}-{fault.name if fault else 'calm'}-{uuid.uuid4().hex[:6]}"
    signed_in = config.buyer_auth if signed_in is None else signed_in
    # The buyers exist before the sale opens, as they would: nothing between the reset
    # and the first purchase but what the fault does there.
    tokens = (buyer_tokens(config, prefix=BUYER_PREFIX, count=buyers, database=database)
              if signed_in else None)
    admin.reset(sku, stock=stock, strategy=strategy)
    if history:
        history.reset(sku, stock)
    if fault is not None:
        fault.before_sale(config)  # a fault's first step, once the sale is open and before any purchase
    sold = 0
    mutex = threading.Lock()
    fire, over = threading.Event(), threading.Event()
    struck = threading.Event()  # the fault has struck (a fault may wait for its moment after fire)
    fault_state: dict = {}

    def run_fault() -> None:
        if fault is None:
            return
        while not fire.wait(0.05):
            if over.is_set():
                return  # the sale never reached the trigger: not injected, and said so
        try:
            fault_state["names"] = fault.inject(config)
        except Exception as e:  # said, and the verdict says it never struck
            print(f"[chaos] {fault.name} could not strike: {type(e).__name__}: {e}", file=sys.stderr,
                  flush=True)
            raise
        fault_state["at"] = time.time()
        struck.set()
        if fault.down_seconds is not None:
            time.sleep(fault.down_seconds)
            fault.heal(config, fault_state["names"])
            fault_state["healed"] = True

    local = threading.local()

    def buyer(n: int) -> DocumentedError:
        nonlocal sold
        if not hasattr(local, "clients"):  # a keep-alive connection per buyer thread and instance
            local.clients = {url: FlashsaleClient(url, timeout=15, tokens=tokens) for url in urls}
        def client_now() -> FlashsaleClient:  # each try, retries too
            if first:
                # Until the strike itself, not the trigger: a fault that waits for a
                # holder there must find one of ``first``'s.
                return local.clients[first if not struck.is_set() else others[n % len(others)]]
            return local.clients[urls[n % len(urls)]]

        answer = _buy(client_now, sku, uuid.uuid4().hex, f"{BUYER_PREFIX}{n}", history)
        if answer.status == 201:
            with mutex:
                sold += 1
                if sold >= trigger:
                    fire.set()
        return answer

    if trigger < 1:
        fire.set()  # it strikes as the sale opens
    injector = threading.Thread(target=run_fault, daemon=True)
    injector.start()
    started = time.time()
    with ThreadPoolExecutor(threads) as pool:
        answers = list(pool.map(buyer, range(buyers)))
    ended = time.time()
    over.set()
    injector.join()
    if "names" in fault_state and not fault_state.get("healed"):
        fault.heal(config, fault_state["names"])
    _until_healthy(config, urls=direct)
    return _judge(config, admin, sku=sku, strategy=strategy, fault=fault, stock=stock, answers=answers,
                  started=started, ended=ended, injected_at=fault_state.get("at"), history=history,
                  database=database, tokens=tokens)


def _judge(config: StackConfig, client: FlashsaleClient, *, sku: str, strategy: str, fault: Fault | None,
           stock: int, answers: list[DocumentedError], started: float, ended: float,
           injected_at: float | None, history: Recorder | None, database: str,
           tokens: dict[str, str] | None) -> Verdict:
    audit = client.audit(sku)  # once the gate's persisters have written what it accepted
    truth = Truth(config, database=database, signed_in=tokens is not None)
    try:
        rows = truth.orders(sku)
        double = truth.double_keys(sku)
        times = truth.order_times(sku)
    finally:
        truth.close()
    orders = dict(rows)
    if history:
        history.final(sku, audit["remaining"], rows)
    lying = Counter()
    for a in answers:
        said = f"{a.status} {a.error}" if a.error else str(a.status)
        if a.status in (200, 201):
            if orders.get(a.key) != a.order_id:
                lying[f"{said} without that order (order {a.order_id}, key {a.key})"] += 1
        elif a.key in orders:
            lying[f"{said} with an order"] += 1
    lies = sum(lying.values())
    users = {a.key: a.user for a in answers}
    local = threading.local()

    def replay(key: str) -> str | None:
        """What was wrong with the replay of ``key``: None if it got its order back."""
        if not hasattr(local, "client"):
            local.client = FlashsaleClient(client.base_url, timeout=15, tokens=tokens)
        response = local.client.order(sku, 1, users[key], key=key)
        body = response.json()
        if response.status_code == 200 and body.get("order_id") == orders[key]:
            return None
        return f"{response.status_code} {body.get('error') or body.get('order_id')}"

    with ThreadPoolExecutor(8) as pool:
        wrong = Counter(w for w in pool.map(replay, orders) if w is not None)
    replays_wrong = sum(wrong.values())
    statuses = Counter(f"{a.status} {a.error}" if a.error else str(a.status) for a in answers)
    notes = [] if injected_at is None else [f"injected {injected_at - started:.1f} s in"]
    notes += [f"replays answered {what}: {n}" for what, n in wrong.items()]
    notes += [f"final answer {what}: {n}" for what, n in lying.items()]
    return Verdict(
        strategy=strategy, fault=fault.name if fault else "calm", stock=stock, orders=audit["orders"],
        oversold=audit["oversold"], lost_updates=audit["lost_updates"],
        ledger_consistent=audit["consistent"], double_keys=double, replays_wrong=replays_wrong,
        lies=lies,
        stall_seconds=_stall(times, sold_out=audit["remaining"] == 0, started=started, ended=ended),
        answers=statuses, seconds=ended - started, injected=fault is None or injected_at is not None,
        struck_at=None if injected_at is None else injected_at - started,
        notes=notes,
    )
