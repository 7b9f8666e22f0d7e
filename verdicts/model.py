"""The sale as a sequential object, the specification a history is checked against.

One product (one sku) is a counter of units and a map of Idempotency-Keys to orders:

- a purchase of ``q`` under a new key succeeds iff at least ``q`` units are left,
  takes them, records the key's order and answers 201 with what is left;
- a purchase under a key that has an order answers 200 with that order, changing
  nothing (a replay); it is never sold out, never a second order;
- ``sold_out`` is answered only when fewer than ``q`` units are left;
- a purchase whose outcome is unknown either did one of the above or nothing.

Segmented stock (``"segments": N``) keeps the same counter: the contract refuses a
purchase as sold out only when all segments together cannot serve it (under their
locks), so a purchase succeeds iff the product has enough. What changes is the 201's
``remaining``: the segments it took from, which is at most what the product has left
(docs/concepts/segments.md); one segment: exactly what the product has left.

States are immutable and hashable (the checker caches them). Only the keys that have
more than one operation are remembered: a key seen once cannot be replayed, and the
final read's orders are checked key by key apart from the search.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.history import FAILED, OK, Final, Purchase

Orders = frozenset  # of (key, order_id or None): an order placed by an unknown purchase has no id yet


@dataclass(frozen=True, slots=True)
class SaleState:
    remaining: int
    orders: Orders = frozenset()

    def order_of(self, key: str) -> tuple[bool, int | None]:
        for k, order_id in self.orders:
            if k == key:
                return True, order_id
        return False, None

    def with_order(self, key: str, order_id: int | None) -> Orders:
        return self.orders - {(key, None)} | {(key, order_id)}


@dataclass(frozen=True, slots=True)
class Step:
    """A purchase as the checker replays it: ``effect`` is "yes" (it took effect:
    an answered order, or an unknown purchase the final read shows placed),
    "maybe" (unknown), or "answer" (a definite refusal or replay to check)."""
    op: Purchase | Final
    effect: str
    order_id: int | None
    tracked: bool  # its key has other operations: remembered in the state
    keys: frozenset = frozenset()  # for the final read: every remembered key


class SaleModel:
    def __init__(self, segments: int = 1):
        self.segments = segments

    def init(self, stock: int) -> SaleState:
        return SaleState(stock)

    def step(self, state: SaleState, step: Step) -> list[SaleState]:
        """The states ``step`` can leave ``state`` in: none if it cannot happen there."""
        op = step.op
        if isinstance(op, Final):
            return [state] if self._final_matches(state, op, step.keys) else []
        placed, order_id = state.order_of(op.key) if step.tracked else (False, None)
        if op.outcome == OK and op.replayed:
            if placed and order_id in (None, op.order_id):
                return [SaleState(state.remaining, state.with_order(op.key, op.order_id))]
            return []
        if op.outcome == FAILED:  # only sold_out reaches the model
            return [state] if not placed and state.remaining < op.quantity else []
        if step.effect == "maybe":
            if placed or state.remaining < op.quantity:
                return [state]  # a replay or a refusal: nothing changes either way
            return [state, self._take(state, step, None)]
        # An order placed by this operation (a 201, or an unknown purchase that the
        # final read shows placed): a new key, enough stock, and what it answered.
        left = state.remaining - op.quantity
        if placed or left < 0:
            return []
        if op.outcome == OK and op.remaining is not None and not self._remaining_ok(op.remaining, left):
            return []
        return [self._take(state, step, step.order_id)]

    def _take(self, state: SaleState, step: Step, order_id: int | None) -> SaleState:
        orders = state.with_order(step.op.key, order_id) if step.tracked else state.orders
        return SaleState(state.remaining - step.op.quantity, orders)

    def _remaining_ok(self, answered: int, left: int) -> bool:
        return answered == left if self.segments == 1 else 0 <= answered <= left

    @staticmethod
    def _final_matches(state: SaleState, final: Final, keys: frozenset) -> bool:
        """The stock left, and for every remembered key: an order at the end iff one was
        placed, the same one."""
        if state.remaining != final.remaining:
            return False
        at_end = dict(final.orders)
        placed = dict(state.orders)
        for key in keys:
            if (key in placed) != (key in at_end) or placed.get(key) not in (None, at_end.get(key)):
                return False
        return True

