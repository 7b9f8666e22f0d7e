"""What a purchase answers, whichever seller made it."""

from __future__ import annotations

from dataclasses import dataclass

from .models import Order


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
