"""What a purchase asks (``Purchase``) and answers (``OrderResult``), whichever
seller makes it."""

from __future__ import annotations

from dataclasses import dataclass

from common.strategies import StrategySpec
from waitingroom.tokens import Admission

from .models import Order


@dataclass(frozen=True)
class Purchase:
    """One purchase as the door made it (``orders.purchase``), once: each seller, and
    each step below it, reads it and changes none of it."""

    sku: str
    quantity: int
    buyer: str  # the buyer's user id
    key: str  # the buyer's idempotency key, or one made for this purchase alone
    keyed: bool  # whether the buyer sent the key (and so may send it again)
    fingerprint: str  # what a request with the same key must agree on
    deadline: float  # time.monotonic() past which the purchase commits nothing
    admission: Admission | None  # the waiting room's, checked at the door (None: none sent)
    strategy: StrategySpec  # the strategy the sale runs under, as the door resolved it


@dataclass(frozen=True)
class Timings:
    """Where a purchase spent its time around the stock, in milliseconds."""

    lock_wait_ms: float  # from asking for the stock lock until it was granted
    # From taking the stock until giving it up: the lock, from granted to released
    # (after the commit); for a lockless strategy, the stock row, from its first
    # write to the commit. What every other buyer of the product waits behind.
    hold_ms: float


@dataclass(frozen=True)
class OrderResult:
    """A purchase's answer, whichever seller made it."""

    order_id: int
    sku: str
    quantity: int
    strategy: str
    instance: str  # the instance that placed (or accepted) the order
    # "confirmed": the order is in the database; "accepted": the gate took the stock
    # and the order is on its way there (GET /api/orders/<id> follows it).
    status: str
    remaining: int
    replayed: bool
    timings: Timings | None = None  # None for a replay

    @classmethod
    def of(cls, order: Order, *, remaining: int, replayed: bool,
           timings: Timings | None = None) -> OrderResult:
        return cls(order_id=order.pk, sku=order.product.sku, quantity=order.quantity, strategy=order.strategy,
                   instance=order.instance, status="confirmed", remaining=remaining, replayed=replayed,
                   timings=timings)
