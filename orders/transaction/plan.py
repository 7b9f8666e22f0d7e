"""The plan-and-deduct loop of the transaction seller: the groups of stock segments
a move of ``quantity`` units tries, in turn (``inventory.services.stock_plan``), a
group that ran dry since the plan's read falling over to the next. A purchase and a
late payment's units taken again both take their stock through it:

    for attempt in StockPlan(segments, quantity, reread=...):
        with attempt:
            done = move(group=attempt.group, count=attempt.count)  # SoldOut: the next group

The loop ends once a try's block raised nothing; a block's ``SoldOut`` moves on to
the next group, any other error leaves the loop; when no group is left, the plan
raises the product's answer. The tries run in the caller's own frame, not under the
plan's (a purchase's stack stays shallow)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import TracebackType

from django.conf import settings

from common.errors import Busy, SoldOut
from inventory.models import Stock
from inventory.selectors import segments_get
from inventory.services import stock_plan

# Rounds of planning a move of a segmented product's stock: the plan comes from a
# plain read, and each round re-reads after every group it named ran dry meanwhile.
PLAN_ROUNDS = 3


class Attempt:
    """One try of the plan's: lock ``group``'s segments (of ``count``), move the stock,
    commit, in a ``with`` block; a block that raises ``SoldOut`` (rolled back) tells the
    plan that the group ran dry."""

    __slots__ = ("plan", "group", "count")

    def __init__(self, plan: StockPlan, group: list[int], count: int):
        self.plan, self.group, self.count = plan, group, count

    def __enter__(self) -> Attempt:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if error is None:
            self.plan.taken = self.group
            return False
        if isinstance(error, SoldOut):
            self.plan.refused, self.plan.last = self.group, error
            return True  # the next group
        return False


class StockPlan:
    """The tries of a move of ``quantity`` units from ``segments`` (see the module).
    Sold out only when no combination of segments can serve the quantity;
    ``reread`` reads the segments afresh for the next round.

    :raises SoldOut: (iterating) a fresh read says the segments together are short,
        before a round (``FLASHSALE_SOLD_OUT_FAST_PATH``); every segment, counted
        under its lock, refused; or the read after the last round says the stock is
        short.
    :raises Busy: (iterating) the groups ran dry under every try, yet the stock is
        still there.
    """

    def __init__(self, segments: list[Stock], quantity: int, *, reread: Callable[[], list[Stock]]):
        self.segments = segments  # as the plan last read them
        self.quantity = quantity
        self._reread = reread
        self.taken: list[int] | None = None  # the group whose try moved the stock
        self.refused: list[int] = []  # the last group that ran dry, and its answer
        self.last: SoldOut | None = None

    def __iter__(self) -> Iterator[Attempt]:
        sku = self.segments[0].product.sku
        fast = settings.FLASHSALE_SOLD_OUT_FAST_PATH
        for round_ in range(PLAN_ROUNDS):
            # The plan's read may be older than a return; a fresh one is one statement's
            # committed state: when even it says the segments together are short, that
            # is the answer, with no lock taken. Else every buyer that came after the
            # stock fell below its purchase would queue on every segment's lock to hear it.
            if round_ or (fast and self._short()):
                self.segments = self._reread()
            if fast and self._short():
                raise SoldOut.short_of(sku, self.quantity, sum(s.quantity for s in self.segments))
            for group in stock_plan(self.segments, self.quantity):
                yield Attempt(self, group, len(self.segments))
                if self.taken is not None:
                    return
            if self.last is not None and len(self.refused) == len(self.segments):
                raise self.last  # every segment, counted under its lock: this is the product's answer
        # Rounds out: the read says what is left (at most that: stock only falls in a sale).
        available = sum(s.quantity for s in segments_get(sku=sku))
        if available >= self.quantity:
            raise Busy(f"{sku}: the segments ran dry under every try; the stock is still there",
                       extra={"sku": sku})
        raise SoldOut.short_of(sku, self.quantity, available)

    def _short(self) -> bool:
        """Whether the segments, as last read, have fewer units than the move's, all together."""
        return sum(s.quantity for s in self.segments) < self.quantity

    def left_beside(self, group: list[int]) -> int:
        """The units of the segments outside ``group``, as the plan last read them."""
        return sum(s.quantity for s in self.segments if s.segment not in group)
