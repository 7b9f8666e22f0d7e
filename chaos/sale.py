"""One sale under one fault: buyers that retry as a careful client does, the fault
injected mid-sale, then the verdict read from the database itself.

A buyer sends one purchase with its own Idempotency-Key and retries it, with the
same key, on a connection error, 502, 503 and 504: 5 tries, backing off from 0.2 s
to 2 s. An answer that says the order may have been taken (503 ``outcome_unknown``
from the app; 502 and 504 from nginx, whose bodies say "it may or may not have gone
through"; no answer at all) is asked again past the 5th try, as the answer itself says
to, until the buyer learns the outcome or 30 s have passed since its first try (a
later try that wrote nothing, a 503 ``busy`` or ``unavailable``, does not tell it:
the earlier try's script or commit may have run). Its last answer is its *final
answer*. The verdict:

- oversold, lost updates and the ledger, as the audit counts them;
- keys with two orders (the unique key should make it impossible);
- replays: every key that has an order, sent again, must get that order back;
- lies: final answers that are not true of the database at the end: a success for a
  key without that order, a refusal or an error for a key that has an order;
- the stall: the longest gap between consecutive orders while stock remained.

With a payment window (``PaymentWindow``), some buyers pay for their order, some at
once and some as it falls due (racing the expirer); the others never pay, so their
units come back, and a second wave of buyers comes for them.
"""

from __future__ import annotations

import random
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import requests

from common.history import FAILED, PAID, REFUNDED, Pay, Recorder
from loadtest.buyers import buyer_tokens
from loadtest.client import FlashsaleClient
from loadtest.payment_figures import settled
from loadtest.provider_ledger import provider_ledger
from loadtest.truth import Truth
from stack.config import StackConfig
from stack.hosted import until_ready
from stack.servers import APP_DATABASE

from .faults import Fault, OnSale

RETRIED = {0, 502, 503, 504}  # 0: no HTTP answer (connection refused, reset, timed out)
# Answers after which the purchase may or may not have gone through: no answer, nginx's
# when no instance answered (502, 504), and the app's outcome_unknown (a 503).
UNKNOWN_STATUSES = {0, 502, 504}
TRIES = 5
BACKOFF = (0.2, 2.0)  # first pause, longest pause; doubling between
# Seconds from its first try that a buyer told the outcome is unknown goes on asking
# what became of its purchase: a failover's pause and reconciliation can outlast 5
# tries, and so can nginx's ten seconds without an instance it marked down.
UNKNOWN_PATIENCE = 30.0
RETRY_POLICY = (f"{TRIES} tries, and past them once a try's outcome is unknown (outcome_unknown, "
                f"nginx's 502 or 504, no answer) until an answer says it; {UNKNOWN_PATIENCE:g} s at most")


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
    # Units the gate's Redis and MariaDB disagree on once the sale settled (a sale with
    # a payment window: every return and late payment done): stranded or unbacked.
    stranded: int = 0

    @property
    def broken(self) -> list[str]:
        """The invariants this sale broke (empty: every answer true, nothing lost)."""
        checks = {"oversold": self.oversold, "lost updates": self.lost_updates,
                  "ledger": not self.ledger_consistent, "keys with two orders": self.double_keys,
                  "replays": self.replays_wrong, "lying answers": self.lies,
                  "units stranded": self.stranded, "fault not injected": not self.injected}
        return [name for name, bad in checks.items() if bad]


def _buy(client_now: Callable[[], FlashsaleClient], sku: str, key: str, user: str,
         history: Recorder | None) -> DocumentedError:
    """Buy with retries; ``client_now()`` says where each try goes."""
    pause = BACKOFF[0]
    patience = time.monotonic() + UNKNOWN_PATIENCE
    attempt = 0
    unknown = False  # an answer said the purchase may have gone through, and none since said how
    while True:
        attempt += 1
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
        # A 503 that wrote nothing (busy, unavailable) is this try's answer alone: it
        # says nothing of an earlier try whose outcome is unknown.
        unknown = unknown or status in UNKNOWN_STATUSES or body.get("error") == "outcome_unknown"
        if status not in RETRIED or (attempt >= TRIES and not (unknown and time.monotonic() < patience)):
            return DocumentedError(key, user, status, body.get("error"), body.get("order_id"), attempt)
        time.sleep(pause)
        pause = min(pause * 2, BACKOFF[1])


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
    seen: object = None  # the last answer, or why there was none: what the error names
    while in_a_row < 2 * config.instances:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the stack did not come back healthy within {seconds:g} s "
                               f"(/healthz last: {seen})")
        try:
            body = client.healthz()
            backends = seen = body.get("backends") or {}
            healthy = bool(backends) and all(state == "ok" for state in backends.values())
        except (requests.RequestException, ValueError) as e:
            seen, healthy = f"{type(e).__name__}: {e}", False
        in_a_row = in_a_row + 1 if healthy else 0
        if not healthy:
            time.sleep(0.2)


BUYER_PREFIX = "chaos-buyer-"  # the n-th buyer of a sale is chaos-buyer-<n>


@dataclass(frozen=True)
class PaymentWindow:
    """A sale whose orders wait ``seconds`` for their payment. A buyer with an order
    pays with probability ``paying``: half of those at once, half as their order falls
    due (its window and the expirer's grace past, give or take ``race`` seconds),
    racing the expirer; the rest never pay. Once the first unpaid orders are due, a
    second wave of ``resale`` buyers comes, over ``spread`` seconds, for the units
    that come back."""

    seconds: float = 2.0
    paying: float = 0.5
    race: float = 0.7
    resale: int = 40
    spread: float = 8.0  # past a lock lease a killed expirer left held
    watch: float = 15.0  # how long a payer watches its order for the payment to land
    seed: int = 0
    twice: float = 0.0  # share of payers that pay twice at once: two tries of one order's payment


PAY_TRIES = 5  # a payment's 503 (the gate's order not in the database yet) is tried again


def sale_under_fault(  # noqa: C901 (one sale, its fault and its checks, in the order they happen)
        config: StackConfig, *, strategy: str, fault: Fault | None, stock: int, buyers: int,
        threads: int, trigger: int, history: Recorder | None = None, urls: list[str] | None = None,
        first: str | None = None, database: str = APP_DATABASE, signed_in: bool | None = None,
        window: PaymentWindow | None = None, provider: str | None = None) -> Verdict:
    """One sale; ``fault`` None: none injected. ``history`` records every try and,
    after the sale has settled, its final read. ``urls``: the instances to buy from,
    buyer by buyer (default: the stack's nginx); ``first``: the one every try goes to
    until the fault strikes (so that it strikes that one holding the lock), the
    others taking every try after; ``database``: the one those instances write, on
    the stack's MariaDB, where the verdict reads the orders; ``signed_in``: whether
    those instances take the buyer from credentials (default: the stack's setting),
    and so each buyer (``BUYER_PREFIX<n>``) is an account made there, buying with its
    bearer token (``loadtest.buyers``); ``window``: the sale has a payment window,
    payers and a second wave (``PaymentWindow``); ``provider``: the payment provider
    those instances pay with (default: the stack's stand-in), whose ledger the final
    read records."""
    direct = urls  # instances reached without nginx: asked /readyz, not nginx's /healthz
    urls = urls or [config.base_url]
    others = [url for url in urls if url != first] or urls
    _until_healthy(config, urls=direct)
    admin = FlashsaleClient(urls[0], admin_token=config.admin_token())
    sku = f"chaos-{strategy}-{fault.name if fault else 'window' if window else 'calm'}-{uuid.uuid4().hex[:6]}"
    signed_in = config.buyer_auth if signed_in is None else signed_in
    # The buyers exist before the sale opens, as they would: nothing between the reset
    # and the first purchase but what the fault does there.
    wave = window.resale if window else 0
    tokens = (buyer_tokens(config, prefix=BUYER_PREFIX, count=buyers + wave, database=database)
              if signed_in else None)
    admin.reset(sku, stock=stock, strategy=strategy,
                **({"payment_window_s": window.seconds} if window else {}))
    if history:
        history.reset(sku, stock, window=window.seconds if window else 0.0,
                      grace=config.payment_grace_s if window else 0.0)
    if fault is not None:
        fault = fault.for_sale(OnSale(sku, stock, strategy, urls[0], history))
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

        rng = random.Random(f"{window.seed if window else 0}-{n}")
        if n >= buyers:  # the second wave, spread out as the unpaid orders fall due
            time.sleep(rng.uniform(0, window.spread))
        elif fault is not None and fault.stagger_s:
            time.sleep(rng.uniform(0, fault.stagger_s))
        answer = _buy(client_now, sku, uuid.uuid4().hex, f"{BUYER_PREFIX}{n}", history)
        if answer.status == 201:
            with mutex:
                sold += 1
                if sold >= trigger:
                    fire.set()
            if window and rng.random() < window.paying:
                payments.append(payers.submit(pay, n, answer, time.monotonic(), rng))
        return answer

    def pay(n: int, answer: DocumentedError, bought: float, rng: random.Random) -> None:
        """Pay for the order, at once or as it falls due, and watch it until the payment lands."""
        due = window.seconds + config.payment_grace_s
        early = rng.random() < 0.5
        wait = rng.uniform(0, window.seconds / 2) if early else due + rng.uniform(-1, 1) * window.race
        time.sleep(max(0.0, bought + wait - time.monotonic()))
        if not hasattr(local, "clients"):
            local.clients = {url: FlashsaleClient(url, timeout=15, tokens=tokens) for url in urls}
        twice = rng.random() < window.twice
        price = _pay(local.clients[urls[n % len(urls)]], answer, sku, history, watch=window.watch,
                     twice=local.clients[urls[(n + 1) % len(urls)]] if twice else None)
        if price is not None:
            prices.add(price)

    if trigger < 1:
        fire.set()  # it strikes as the sale opens
    injector = threading.Thread(target=run_fault, daemon=True)
    injector.start()
    started = time.time()
    payments: list = []
    prices: set[int] = set()  # what the shop asked for one unit, as its payments said
    with ThreadPoolExecutor(threads) as pool, ThreadPoolExecutor(threads) as payers:
        answers = list(pool.map(buyer, range(buyers)))
        if window:  # the second wave, once the first unpaid orders are due
            time.sleep(max(0.0, started + window.seconds + config.payment_grace_s - time.time()))
            answers += list(pool.map(buyer, range(buyers, buyers + wave)))
        for payment in payments:
            payment.result()
    ended = time.time()
    over.set()
    injector.join()
    if "names" in fault_state and not fault_state.get("healed"):
        fault.heal(config, fault_state["names"])
    _until_healthy(config, urls=direct)
    return _judge(config, admin, sku=sku, strategy=strategy, fault=fault, stock=stock, answers=answers,
                  started=started, ended=ended, injected_at=fault_state.get("at"), history=history,
                  database=database, tokens=tokens, window=window,
                  provider=provider or f"http://127.0.0.1:{config.payprovider_port}",
                  unit_price=min(prices) if len(prices) == 1 else None)


def _pay(client: FlashsaleClient, answer: DocumentedError, sku: str, history: Recorder | None, *,
         watch: float, twice: FlashsaleClient | None = None) -> int | None:
    """Pay for ``answer``'s order (a 503 tried again with the same key), then follow the
    order until the payment lands (paid, or refunded: too late) or ``watch`` seconds
    pass; recorded as one payment. ``twice``: a second payment of the order under a
    key of its own, sent at once through that client (a buyer who pressed Pay in two
    tabs); the order is charged at most once (its one intent: the other try is 409,
    or declined), so it is recorded as the same payment. Returns the price the shop
    asked for a unit, if it said."""
    op = history.pay(answer.user, sku, answer.order_id) if history else Pay(0, answer.user, sku,
                                                                               answer.order_id, 0)
    if twice is None:
        status, price = _payment_sent(client, answer)
    else:
        with ThreadPoolExecutor(1) as other:
            second = other.submit(_payment_sent, twice, answer)
            status, price = _payment_sent(client, answer)
        second_status, second_price = second.result()
        if second_status not in (402, 404, 409):
            status, price = second_status, price or second_price  # one of them may pay: watch the order
    if status in (402, 404, 409):  # declined, or the order waits for no payment: nothing was done
        op.outcome, op.complete = FAILED, Recorder.now()
        return None
    deadline = time.monotonic() + watch
    while time.monotonic() < deadline:
        try:
            response = client.order_detail(answer.order_id, answer.user)
            landed = response.json().get("payment_status") if response.status_code == 200 else None
        except (requests.RequestException, ValueError):
            landed = None
        if landed in (PAID, REFUNDED):
            op.landed(landed, Recorder.now())
            return price
        time.sleep(0.1)
    # Never seen landing: unknown, and it may still land before the final read.
    return price


def _payment_sent(client: FlashsaleClient, answer: DocumentedError) -> tuple[int, int | None]:
    """One payment of ``answer``'s order under a key of its own, a 503 tried again:
    its last status (0: no answer) and the unit price it said."""
    key = uuid.uuid4().hex
    status, price = 0, None
    for _ in range(PAY_TRIES):
        try:
            response = client.pay(answer.order_id, answer.user, key=key)
            status = response.status_code
            if status in (200, 201, 202):
                price = response.json().get("amount")
        except (requests.RequestException, ValueError):
            status = 0  # the provider may have it: watch the order all the same
        if status != 503:
            break
        time.sleep(0.2)
    return status, price


def _read_twice(client: FlashsaleClient, truth: Truth, sku: str, *,
                statuses: bool) -> tuple[dict, list[tuple]]:
    """The final read: the audit and every order (with its status, in a sale with a
    window), read until two reads in a row agree, so that no move lands between the
    read of the stock and that of the orders."""
    earlier = None
    for _ in range(50):
        audit = client.audit(sku)  # once the gate's persisters have written what it accepted
        rows = truth.orders(sku, statuses=statuses)
        if earlier == (audit["remaining"], rows):
            return audit, rows
        earlier = audit["remaining"], rows
        time.sleep(0.2)
    raise RuntimeError(f"{sku}: the stock and the orders still moved after 50 reads")


# How long the units of expired orders may take to reach the gate's Redis after the
# database has them back: an expirer restarted sweeps at its start, one that waits for
# a rebuild pays at its next pass, and every expirer sweeps each minute.
RETURNS_SETTLE_S = 75.0


def _stranded(client: FlashsaleClient, sku: str, audit: dict) -> int:
    """Units the gate's Redis and MariaDB disagree on (0: not the gate), once every
    return owed to Redis has had its time (``RETURNS_SETTLE_S``): stranded, or sold
    without MariaDB's stock. ``audit`` is updated to the last one read."""
    deadline = time.monotonic() + RETURNS_SETTLE_S
    while True:
        gate = audit.get("gate")
        if not gate:
            return 0
        apart = abs((gate.get("redis_remaining") or 0) - audit["remaining"])
        if apart == 0 or time.monotonic() > deadline:
            return apart
        time.sleep(0.5)
        audit.update(client.audit(sku))


def _judge(config: StackConfig, client: FlashsaleClient, *, sku: str, strategy: str, fault: Fault | None,
           stock: int, answers: list[DocumentedError], started: float, ended: float,
           injected_at: float | None, history: Recorder | None, database: str,
           tokens: dict[str, str] | None, window: PaymentWindow | None = None, provider: str = "",
           unit_price: int | None = None) -> Verdict:
    truth = Truth(config, database=database, signed_in=tokens is not None)
    try:
        if window:
            # Nothing moves any more once no order is pending: the last unpaid ones
            # expired (a window and the grace after the second wave), payments landed.
            settled(truth, sku, within=window.seconds + config.payment_grace_s + 30)
        reopened = fault is not None and fault.reopens
        audit, rows = _read_twice(client, truth, sku, statuses=window is not None or reopened)
        double = truth.double_keys(sku)
        times = truth.order_times(sku)
    finally:
        truth.close()
    orders = {row[0]: row[1] for row in rows}
    # Once every return owed to the gate's Redis has had its time: the final read
    # records what it holds, and what the provider took for the orders.
    stranded = _stranded(client, sku, audit) if window else 0
    gate = audit.get("gate") or {}
    if history:
        money = (provider_ledger(provider, config.payments_api_key(), [row[1] for row in rows])
                 if window else None)
        history.final(sku, audit["remaining"], rows, money=money, unit_price=unit_price,
                      gate_remaining=gate.get("redis_remaining") if window else None)
    lying = Counter()
    for a in answers:
        said = f"{a.status} {a.error}" if a.error else str(a.status)
        if a.status in (200, 201):
            # A sale reset under the buyers cleared the old sale's orders: their 201s
            # were true then. The new sale's orders are the checker's to judge.
            if orders.get(a.key) != a.order_id and not reopened:
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
    if stranded:
        notes.append(f"the gate's Redis holds {gate.get('redis_remaining')} where MariaDB holds "
                     f"{audit['remaining']}")
    return Verdict(
        strategy=strategy, fault=fault.name if fault else "calm", stock=stock, orders=audit["orders"],
        oversold=audit["oversold"], lost_updates=audit["lost_updates"],
        ledger_consistent=audit["consistent"], double_keys=double, replays_wrong=replays_wrong,
        lies=lies,
        stall_seconds=_stall(times, sold_out=audit["remaining"] == 0, started=started, ended=ended),
        answers=statuses, seconds=ended - started, injected=fault is None or injected_at is not None,
        struck_at=None if injected_at is None else injected_at - started,
        notes=notes, stranded=stranded,
    )
