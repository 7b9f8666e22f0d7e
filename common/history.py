"""A sale's history: every operation's invocation and completion on one clock, what
it asked and what it was answered, as JSON lines a user can write too.

One JSON object a line; ``type`` says which:

- ``reset``: ``{"type": "reset", "sku", "stock", "segments"?, "window"?, "grace"?,
  "opens_at"?, "at"}``: the sale opens with ``stock`` units (``segments``: 1 unless
  given; ``window``: the payment window in seconds, 0 unless given; ``grace``: how
  long past it the expirer waits, 0 unless given; ``opens_at``: when it starts
  selling, at once unless given). The checker starts each sku from its reset. A sku
  reset again mid-history is a new sale from that reset on (its orders cleared): each
  operation belongs to the sale in which it was invoked, the final read to the last.
- ``purchase``: ``{"type": "purchase", "id", "client", "sku", "quantity", "key",
  "invoke", "complete", "outcome", ...}`` with ``outcome``:

  - ``ok``: answered with an order: ``"order_id"``, ``"replayed"`` (a 200: the key's
    earlier order), ``"remaining"`` (a 201's stock left);
  - ``failed``: refused for certain, nothing written; ``"error"`` says why
    (``sold_out`` is checked against the stock; the others are taken at their word
    and checked at the end, when the sale has a final read);
  - ``unknown``: it may or may not have taken effect (``outcome_unknown``, a 504,
    no answer, a timeout); ``complete`` is when the client gave up.

- ``pay``: ``{"type": "pay", "id", "client", "sku", "order_id", "invoke", "complete",
  "outcome", "result"?}``: a buyer paid for an order (a sale with a window) and
  watched it until the payment landed. ``ok`` with ``result`` ``paid`` (in time: the
  order was pending; late: it had expired, and the payment took its units back) or
  ``refunded`` (late, and fewer units were left than it needs); ``failed``: the
  payment did nothing; ``unknown``: any of these, before the final read.
- ``final``: ``{"type": "final", "sku", "remaining", "orders": [[key, order_id,
  status?], ...], "at", "gate_remaining"?, "money"?, "unit_price"?}``: the sale read
  after every client stopped and every accepted order was written: the stock left
  and every order, one entry per order row, with its status in a sale with a window.
  An ``unknown`` purchase or payment took effect, if ever, before it. Where the gate
  sells, ``gate_remaining`` is what its Redis says is left; where orders are paid,
  ``money`` is the provider's ledger, ``[order_id, charged, refunded]`` per order in
  minor units, and ``unit_price`` a unit's price (``verdicts.conservation``).

In a sale with a window, each order's expiry is an operation no client sees: the
expirer returns a pending order's units at some instant from its purchase's
invocation plus the window and the grace to the final read, and the final read's status says
whether it did (``expired``, ``refunded``: yes; ``pending``: no; ``paid``: only if
the payment came late).

``invoke``, ``complete`` and ``at`` are nanoseconds of ``time.monotonic_ns()``:
CLOCK_MONOTONIC, one clock for every process on the machine (network namespaces
included), so histories recorded by several processes can be merged.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

OK, FAILED, UNKNOWN = "ok", "failed", "unknown"
OUTCOMES = (OK, FAILED, UNKNOWN)
PAID, REFUNDED = "paid", "refunded"  # what an ok payment ended in
# An order's, in a sale with a window (``placed``: final at its 201, no payment step,
# which a sale with a window must never hold; a history may still show one).
STATUSES = ("pending", PAID, "expired", REFUNDED, "placed")

# Refusals that the contract says wrote nothing (docs/reference/http.md); every other
# answer that is not an order may have taken effect.
_NOTHING_WRITTEN = {400, 401, 403, 404, 409, 413, 429}
_NOTHING_WRITTEN_503 = {"busy", "stale_lock", "unavailable"}


class HistoryError(ValueError):
    """A history file that does not follow the format (line number and why)."""


@dataclass
class Purchase:
    id: int
    client: str
    sku: str
    quantity: int
    key: str
    invoke: int
    complete: int | None = None
    outcome: str = UNKNOWN
    status: int = 0  # the HTTP status; 0: no answer
    error: str | None = None
    order_id: int | None = None
    remaining: int | None = None
    replayed: bool = False
    type: str = field(default="purchase", init=False)

    def answered(self, status: int, body: dict[str, Any], complete: int) -> None:
        """Classify an HTTP answer by the contract (docs/reference/http.md)."""
        self.complete, self.status = complete, status
        self.error = body.get("error") if isinstance(body, dict) else None
        if status in (200, 201) and isinstance(body.get("order_id"), int):
            self.outcome, self.order_id = OK, body["order_id"]
            self.replayed = status == 200
            self.remaining = body.get("remaining") if status == 201 else None
        elif status in _NOTHING_WRITTEN or (status == 503 and self.error in _NOTHING_WRITTEN_503):
            self.outcome = FAILED
        else:  # 503 outcome_unknown, 504, nginx's 502 (the instance may have died mid-purchase)
            self.outcome = UNKNOWN

    def unanswered(self, complete: int, why: str) -> None:
        self.complete, self.status, self.outcome, self.error = complete, 0, UNKNOWN, why

    def describe(self) -> str:
        asked = f"buy {self.quantity} key {self.key[:10]}"
        if self.outcome == OK:
            said = f"{'200 replay' if self.replayed else '201'} order {self.order_id}"
            if self.remaining is not None:
                said += f" remaining {self.remaining}"
        elif self.outcome == FAILED:
            said = f"{self.status} {self.error or ''}".strip()
        else:
            said = f"unknown ({self.status or self.error or 'no answer'})"
        return f"#{self.id} {self.client}: {asked} -> {said}"


@dataclass
class Pay:
    id: int
    client: str
    sku: str
    order_id: int
    invoke: int
    complete: int | None = None
    outcome: str = UNKNOWN
    result: str | None = None  # PAID or REFUNDED, for an ok payment
    type: str = field(default="pay", init=False)

    def landed(self, status: str, complete: int) -> None:
        """The order was seen ``status`` after the payment: paid or refunded is its
        outcome; anything else is not (yet) known."""
        self.complete = complete
        if status in (PAID, REFUNDED):
            self.outcome, self.result = OK, status

    def describe(self) -> str:
        said = self.result if self.outcome == OK else self.outcome
        return f"#{self.id} {self.client}: pay order {self.order_id} -> {said}"


@dataclass
class Reset:
    sku: str
    stock: int
    at: int
    segments: int = 1
    window: float = 0.0
    grace: float = 0.0
    # When the sale opens, on the history's clock (None: at once): no purchase takes
    # effect before it, and none is answered with an order (a sale reset to open later).
    opens_at: int | None = None
    type: str = field(default="reset", init=False)


# A final order: (key, order_id), or (key, order_id, status) in a sale with a window.
FinalOrder = tuple[str, int] | tuple[str, int, str]
# The provider's ledger for one order: (order_id, charged, refunded), in minor units.
Charge = tuple[int, int, int]


@dataclass
class Final:
    sku: str
    remaining: int
    orders: list[FinalOrder]
    at: int
    # The gate's own count of what is left (its Redis), where the gate sells: it must
    # be ``remaining`` once every return and late payment has reached it.
    gate_remaining: int | None = None
    # The provider's ledger, where orders are paid: what it took for each order and
    # gave back, ``[[order_id, charged, refunded], ...]`` in minor units, and a unit's price.
    money: list[Charge] | None = None
    unit_price: int | None = None
    type: str = field(default="final", init=False)


Event = Purchase | Pay | Reset | Final


class Recorder:
    """Collects a history from many client threads (thread-safe), then writes it.

    >>> op = recorder.invoke("buyer-3", sku, 1, key)   # just before the request
    >>> op.answered(response.status_code, body, recorder.now())
    """

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    @staticmethod
    def now() -> int:
        return time.monotonic_ns()

    def _add(self, event: Event) -> Event:
        with self._lock:
            self.events.append(event)
        return event

    def reset(self, sku: str, stock: int, segments: int = 1, window: float = 0.0, grace: float = 0.0,
              opens_in: float | None = None) -> None:
        """The sale opens (``opens_in``: that many seconds from now, not at once)."""
        now = self.now()
        opens_at = None if opens_in is None else now + round(opens_in * 1e9)
        self._add(Reset(sku, stock, now, segments, window, grace, opens_at))

    def invoke(self, client: str, sku: str, quantity: int, key: str) -> Purchase:
        with self._lock:
            op = Purchase(next(self._ids), client, sku, quantity, key, self.now())
            self.events.append(op)
        return op

    def pay(self, client: str, sku: str, order_id: int) -> Pay:
        with self._lock:
            op = Pay(next(self._ids), client, sku, order_id, self.now())
            self.events.append(op)
        return op

    def final(self, sku: str, remaining: int, orders: Iterable[Iterable[Any]], *,
              gate_remaining: int | None = None, money: Iterable[Iterable[int]] | None = None,
              unit_price: int | None = None) -> None:
        """``orders`` and ``money`` as ``Final`` holds them, in any sequence (a JSON list)."""
        kept = [cast(FinalOrder, tuple(o)) for o in orders]
        ledger = None if money is None else [cast(Charge, tuple(m)) for m in money]
        self._add(Final(sku, remaining, kept, self.now(), gate_remaining, ledger, unit_price))

    def write(self, path: Path) -> Path:
        write(path, self.events)
        return path


def write(path: Path, events: Iterable[Event]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for event in events:
            f.write(json.dumps(asdict(event), separators=(",", ":")) + "\n")


def _event(raw: dict[str, Any]) -> Event:
    kind = raw.pop("type", None)
    if kind in ("purchase", "pay") and raw.get("outcome") not in OUTCOMES:
        raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}")
    if kind == "purchase":
        op = Purchase(**raw)
        if op.outcome == OK and op.order_id is None:
            raise ValueError("an ok purchase names its order_id")
        return _timed(op, "purchase")
    if kind == "pay":
        pay = Pay(**raw)
        if (pay.outcome == OK) != (pay.result in (PAID, REFUNDED)):
            raise ValueError(f"an ok payment, and only one, says its result ({PAID} or {REFUNDED})")
        return _timed(pay, "payment")
    if kind == "reset":
        return Reset(**raw)
    if kind == "final":
        raw["orders"] = [_final_order(o) for o in raw.get("orders", [])]
        if raw.get("money") is not None:
            raw["money"] = [_charge(m) for m in raw["money"]]
        return Final(**raw)
    raise ValueError(f"unknown type {kind!r} (purchase, pay, reset, final)")


def _timed(op: Purchase | Pay, what: str) -> Purchase | Pay:
    """``op``, whose completion (none only for an unknown outcome) follows its invocation."""
    if op.complete is None and op.outcome != UNKNOWN:
        raise ValueError(f"only an unknown {what} may lack its completion")
    if op.complete is not None and op.complete < op.invoke:
        raise ValueError("completed before it was invoked")
    return op


def _final_order(raw: list[Any]) -> FinalOrder:
    if len(raw) == 2:
        return str(raw[0]), int(raw[1])
    if len(raw) == 3 and raw[2] in STATUSES:
        return str(raw[0]), int(raw[1]), raw[2]
    raise ValueError(f"a final order is [key, order_id] or [key, order_id, status of {', '.join(STATUSES)}]")


def _charge(raw: list[Any]) -> Charge:
    if len(raw) == 3 and all(isinstance(n, int) and n >= 0 for n in raw):
        order_id, charged, refunded = raw
        return order_id, charged, refunded
    raise ValueError("a final money entry is [order_id, charged, refunded], whole numbers of at least 0")


def read(path: Path) -> list[Event]:
    return list(parse(path.read_text().splitlines()))


def parse(lines: Iterable[str]) -> Iterator[Event]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if not isinstance(raw, dict):
                raise ValueError("each line is one JSON object")
            yield _event(raw)
        except (ValueError, TypeError) as e:
            raise HistoryError(f"line {number}: {e}") from None
