"""The sale as a sequential object, the specification a history is checked against.

One product (one sku) is a counter of units and a map of Idempotency-Keys to orders:

- a purchase of ``q`` under a new key succeeds iff at least ``q`` units are left,
  takes them, records the key's order and answers 201 with what is left;
- a purchase under a key that has an order answers 200 with that order, changing
  nothing (a replay); it is never sold out, never a second order;
- ``sold_out`` is answered only when fewer than ``q`` units are left;
- a purchase whose outcome is unknown either did one of the above or nothing.

With a payment window, each order also has a status, and two more operations move
it, each once:

- an expiry returns a ``pending`` order's units (it becomes ``expired``); on a
  ``paid`` order it does nothing (the expirer's move is conditional);
- a payment makes a ``pending`` order ``paid`` (in time), or an ``expired`` one
  ``paid`` again, taking its units back, when that many are left, and ``refunded``,
  taking nothing, when they are not (late). Its answer says which.

So the stock goes down by purchases and late payments and up by expiries, and every
unit is either left, or held by exactly one pending or paid order.

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

from common.history import FAILED, OK, PAID, REFUNDED, UNKNOWN, Final, Pay, Purchase

Orders = frozenset  # of (key, order_id or None): an order placed by an unknown purchase has no id yet
Statuses = frozenset  # of (order_id, status), in a sale with a window
PENDING, EXPIRED = "pending", "expired"


@dataclass(frozen=True, slots=True)
class Expire:
    """An order's expiry, which no client sees: the checker places it anywhere from
    ``invoke`` (the invocation of the purchase that placed it, or its key's first if
    that purchase's answer was lost, plus the window and the grace) to the final read."""
    sku: str
    order_id: int
    invoke: int
    client: str = "expirer"
    outcome: str = UNKNOWN
    complete: None = None

    def describe(self) -> str:
        return f"expirer: order {self.order_id} expires"


@dataclass(frozen=True, slots=True)
class SaleState:
    remaining: int
    orders: Orders = frozenset()
    statuses: Statuses = frozenset()

    def order_of(self, key: str) -> tuple[bool, int | None]:
        for k, order_id in self.orders:
            if k == key:
                return True, order_id
        return False, None

    def with_order(self, key: str, order_id: int | None) -> Orders:
        return self.orders - {(key, None)} | {(key, order_id)}

    def status_of(self, order_id: int) -> str | None:
        for o, status in self.statuses:
            if o == order_id:
                return status
        return None

    def moved(self, order_id: int, status: str, units: int) -> SaleState:
        """The order moved to ``status``, ``units`` going back to the stock (negative: taken)."""
        old = self.status_of(order_id)
        statuses = (self.statuses - {(order_id, old)}) | {(order_id, status)}
        return SaleState(self.remaining + units, self.orders, statuses)


@dataclass(frozen=True, slots=True)
class Step:
    """An operation as the checker replays it: ``effect`` is "yes" (it took effect:
    an answered order, an unknown purchase the final read shows placed, an expiry the
    final read shows), "maybe" (unknown), or "answer" (a definite refusal or replay
    to check)."""
    op: Purchase | Pay | Expire | Final
    effect: str
    order_id: int | None
    tracked: bool  # its key has other operations: remembered in the state
    keys: frozenset = frozenset()  # for the final read: every remembered key
    units: int = 0  # a payment's or an expiry's: its order's quantity
    # Its order's status is followed in the state (a sale with a window; not for an
    # order nothing but its purchase and expiry touches: those expiries are alike).
    statused: bool = False
    statuses: frozenset = frozenset()  # for the final read: every followed order


class SaleModel:
    def __init__(self, segments: int = 1):
        self.segments = segments

    def init(self, stock: int) -> SaleState:
        return SaleState(stock)

    def step(self, state: SaleState, step: Step) -> list[SaleState]:
        """The states ``step`` can leave ``state`` in: none if it cannot happen there."""
        op = step.op
        if isinstance(op, Final):
            return [state] if self._final_matches(state, op, step.keys, step.statuses) else []
        if isinstance(op, Expire):
            return self._expire(state, step)
        if isinstance(op, Pay):
            return self._pay(state, step)
        placed, order_id = state.order_of(op.key) if step.tracked else (False, None)
        if op.outcome == OK and op.replayed:
            if placed and order_id in (None, op.order_id):
                return [SaleState(state.remaining, state.with_order(op.key, op.order_id), state.statuses)]
            return []
        if op.outcome == FAILED:  # only sold_out reaches the model
            return [state] if not placed and state.remaining < op.quantity else []
        if step.effect == "maybe":
            if placed or state.remaining < op.quantity:
                return [state]  # a replay or a refusal: nothing changes either way
            return [state, self._take(state, step, step.order_id)]
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
        statuses = state.statuses
        if step.statused and order_id is not None:
            statuses = statuses | {(order_id, PENDING)}
        return SaleState(state.remaining - step.op.quantity, orders, statuses)

    @staticmethod
    def _expire(state: SaleState, step: Step) -> list[SaleState]:
        if not step.statused:  # an order only its purchase, before, and this expiry touch
            return [SaleState(state.remaining + step.units, state.orders, state.statuses)]
        status = state.status_of(step.op.order_id)
        if status == PENDING:
            # Even an expiry that may not have happened: had it done nothing here, it is
            # the same as one ordered after the payment (its interval ends at that
            # payment's completion), where it does nothing by the rule below. Trying both
            # here would double the search for every such expiry still open.
            return [state.moved(step.op.order_id, EXPIRED, step.units)]
        if status == PAID and step.effect == "maybe":
            return [state]  # paid in time: the expirer's conditional move finds it paid
        return []  # not placed yet, or its units returned already

    @staticmethod
    def _pay(state: SaleState, step: Step) -> list[SaleState]:
        op = step.op
        status = state.status_of(op.order_id)
        landed: list[tuple[str, SaleState]] = []
        if status == PENDING:
            landed.append((PAID, state.moved(op.order_id, PAID, 0)))
        elif status == EXPIRED and state.remaining >= step.units:
            landed.append((PAID, state.moved(op.order_id, PAID, -step.units)))  # taken back
        elif status == EXPIRED:
            landed.append((REFUNDED, state.moved(op.order_id, REFUNDED, 0)))  # none left for it
        if op.outcome == OK:
            return [after for result, after in landed if result == op.result]
        return [state] + [after for _, after in landed]  # unknown: it may have done nothing

    def _remaining_ok(self, answered: int, left: int) -> bool:
        return answered == left if self.segments == 1 else 0 <= answered <= left

    @staticmethod
    def _final_matches(state: SaleState, final: Final, keys: frozenset, followed: frozenset) -> bool:
        """The stock left; for every remembered key: an order at the end iff one was
        placed, the same one; every followed order, in its status."""
        if state.remaining != final.remaining:
            return False
        if {(o[1], o[2]) for o in final.orders if len(o) == 3 and o[1] in followed} != state.statuses:
            return False
        at_end = {o[0]: o[1] for o in final.orders}
        placed = dict(state.orders)
        for key in keys:
            if (key in placed) != (key in at_end) or placed.get(key) not in (None, at_end.get(key)):
                return False
        return True

