"""The plan-and-deduct loop of the transaction seller: the groups of stock segments
a move of ``quantity`` units tries, in turn (``inventory.services.stock_plan``), a
group that ran dry since the plan's read falling over to the next. A purchase and a
late payment's units taken again both take their stock through it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, NamedTuple, Protocol, TypeVar

from common.errors import Busy, SoldOut
from inventory.models import Stock
from inventory.selectors import segments_get
from inventory.services import stock_plan

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

# Rounds of planning a move of a segmented product's stock: the plan comes from a
# plain read, and each round re-reads after every group it named ran dry meanwhile.
PLAN_ROUNDS = 3


class Attempt(Protocol[T_co]):
    """One try of the plan's: lock ``group``'s segments (of ``count``), move the stock,
    commit; SoldOut when the group has too little (rolled back)."""

    def __call__(self, *, group: list[int], count: int) -> T_co: ...


class Taken(NamedTuple, Generic[T]):
    """What the try that took the stock gave (``done``), its group of segments, and
    the segments as the plan last read them."""

    done: T
    group: list[int]
    segments: list[Stock]


def plan_tried(segments: list[Stock], quantity: int, *, attempt: Attempt[T],
               reread: Callable[[], list[Stock]]) -> Taken[T]:
    """Call ``attempt(group=..., count=...)`` for each group of ``segments`` the plan
    names, until one does not raise ``SoldOut`` (it locks the group, moves the stock,
    commits: a SoldOut rolled it back). Sold out only when no combination of
    segments can serve the quantity; ``reread`` reads the segments afresh for the
    next round.

    :raises SoldOut: every segment, counted under its lock, refused; or the read
        after the last round says the stock is short.
    :raises Busy: the groups ran dry under every try, yet the stock is still there.
    """
    sku = segments[0].product.sku
    for round_ in range(PLAN_ROUNDS):
        if round_:
            segments = reread()
        for group in stock_plan(segments, quantity):
            try:
                return Taken(attempt(group=group, count=len(segments)), group, segments)
            except SoldOut as e:
                refused, last = group, e  # the group ran dry since the read: the next one
        if len(refused) == len(segments):
            raise last  # every segment, counted under its lock: this is the product's answer
    # Rounds out: the read says what is left (at most that: stock only falls in a sale).
    available = sum(s.quantity for s in segments_get(sku=sku))
    if available >= quantity:
        raise Busy(f"{sku}: the segments ran dry under every try; the stock is still there",
                   extra={"sku": sku})
    raise SoldOut.short_of(sku, quantity, available)
