"""The locked transaction's purchase (every strategy but the gate): claim the
idempotency key → check the sale's state (its strategy, its window, sold out?) → read
the product's stock segments (once per sale and process: ``_segments_planned``) → for
each group of segments the plan names: acquire their locks → open the transaction →
count the buyer's units, create the order, deduct the stock, append the flow rows →
commit → release the locks; a group that ran dry since the read falls over to the
next. Where no Python needs to run between those statements (``atomic``, one
segment), the transaction is one stored-procedure call (``procedure``). The locks
are held across the commit: released earlier, the next holder could read the stock
before this write is visible. A lock's fencing token goes with the deduction, which
refuses it once a newer holder wrote: a lease that ran out mid-purchase costs this
purchase, not the stock.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone

from common.errors import Busy, OutcomeUnknown, SoldOut, StockChanged, Unavailable
from common.memory import ProcessMemory
from common.requestlog import request_id_current
from common.strategies import StrategySpec
from inventory.models import Product, Stock
from inventory.selectors import segments_get
from inventory.services import Deducted, Fence, Operation, stock_deduct
from locking import BaseLock, LockLostError, get_locks
from waitingroom.selectors import room_of
from waitingroom.services import admission_refused_error, admission_spend, admission_unspend

from ..idempotency import (
    flag_complete,
    flag_unsettled,
    key_claimed_or_replay,
    key_freed_or_replay,
    replay_by_key,
)
from ..models import Order
from ..quota import quota_open, quota_take
from ..resolve import strategy_confirmed
from ..results import OrderResult, Purchase, Timings
from ..salestate import LOST, SaleState, sale_state_get, sale_state_sold_out
from ..stocklocks import CommitFailed, lock_name, outcome_unknown_error, stock_locks_held
from ..window import SaleWindow
from .plan import StockPlan
from .procedure import past_deadline_error, purchase_call


def transaction_sell(purchase: Purchase, segments: list[Stock] | None) -> OrderResult:
    """The locked transaction's purchase: the order is in the database when it returns.
    The buyer's admission is spent under the purchase's key first (``_admission_spent``);
    ``segments``: the sale's, as the door's resolve read them (None: read here)."""
    sku, quantity, strategy, key = purchase.sku, purchase.quantity, purchase.strategy, purchase.key
    with _admission_spent(purchase) as admitted:
        if purchase.keyed:
            known = key_claimed_or_replay(key=key, fingerprint=purchase.fingerprint)
            if known is not None:
                return known  # a replay is answered even after the sale sold out

        state = sale_state_get(sku=sku)  # after the claim: see orders.salestate
        sale = None  # the sale whose rows the purchase reads (Product.sale)
        try:
            segments, state = _sale_checked(sku=sku, quantity=quantity, state=state, strategy=strategy,
                                            segments=segments, admitted=admitted)
            product = segments[0].product
            sale = product.sale
            quota_open(product=product, user_id=purchase.buyer)
            # Each group of segments the plan names, in turn (orders.transaction.plan).
            plan = StockPlan(segments, quantity, reread=lambda: _segments_planned(sku, None))
            # The loop ends once a try's block raised nothing (else the plan raises
            # the product's answer): what it bound is the purchase's.
            for attempt in plan:
                with attempt:
                    # The group's stock locks, made at this level: the backend's frames
                    # that make them add no depth under _group_bought.
                    names = {segment: lock_name(sku, segment, attempt.count) for segment in attempt.group}
                    lock = get_locks(names.values(), alias=strategy.lock)
                    order, deducted, timings = _group_bought(purchase, product=product, names=names,
                                                             lock=lock)
        except IntegrityError:
            # The Redis flag was gone (expired, flushed) and an earlier request with
            # this key had committed: the unique key refused the second order.
            known = replay_by_key(key=key, fingerprint=purchase.fingerprint)
            if known is None:
                raise
            return known
        except OutcomeUnknown as e:
            if purchase.keyed:
                _flag_unknown(e, purchase=purchase)
            raise
        except BaseException as e:
            known = _refused(e, purchase=purchase, state=state, sale=sale)
            if known is None:
                raise
            return known
        # What the product has left, as far as this purchase knows: at least what the
        # segments it took from have left (the answer's "remaining"), and the others'.
        if deducted.remaining + plan.left_beside(attempt.group) == 0:
            sale_state_sold_out(sku=sku, strategy=strategy.name, sale=sale, returns=state.returns)
        if purchase.keyed:
            flag_complete(key=key, fingerprint=purchase.fingerprint, order_id=order.pk)
        return OrderResult.of(order, remaining=deducted.remaining, replayed=False, timings=timings)


@contextmanager
def _admission_spent(purchase: Purchase) -> Iterator[bool]:
    """The buyer's admission spent under the purchase's key for the block (whether the
    sale's room took one). A block that failed with no decision of the sale's and
    nothing written gives an unkeyed purchase's admission back: it cannot spend it
    again under its key (the gate's script spends it with its decision alone). A
    keyed one can, and another request with its key, still under way, may be the one
    that buys with it: it stays spent."""
    admitted = admission_spend(sku=purchase.sku, buyer=purchase.buyer, admission=purchase.admission,
                               key=purchase.key)
    try:
        yield admitted
    except (Busy, Unavailable, DatabaseError):
        if admitted and not purchase.keyed:
            admission_unspend(sku=purchase.sku, buyer=purchase.buyer, key=purchase.key)
        raise


def _flag_unknown(e: OutcomeUnknown, *, purchase: Purchase) -> None:
    """A keyed purchase whose commit's outcome is unknown: its key's flag says so, and
    a retry asks the database at once; a flag that names the order, whether it landed."""
    if e.order_id is None:
        flag_unsettled(key=purchase.key, fingerprint=purchase.fingerprint)
    else:
        flag_complete(key=purchase.key, fingerprint=purchase.fingerprint, order_id=e.order_id)


def _refused(e: BaseException, *, purchase: Purchase, state: SaleState, sale: int | None,
             ) -> OrderResult | None:
    """A refusal's aftermath: the sale numbered ``sale`` (None: its rows were not
    read) marked sold out when it says so, and a keyed purchase's key freed or settled
    (``key_freed_or_replay``); the answer of an earlier request with the key, if
    there is one to give instead."""
    if isinstance(e, SoldOut) and e.extra.get("remaining") == 0 and not state.sold_out and sale is not None:
        sale_state_sold_out(sku=purchase.sku, strategy=purchase.strategy.name, sale=sale,
                            returns=state.returns)
    if not purchase.keyed:
        return None
    return key_freed_or_replay(e, key=purchase.key, fingerprint=purchase.fingerprint,
                               flags_complete=state.flags_complete, deadline=purchase.deadline)


def _sale_checked(*, sku: str, quantity: int, state: SaleState, strategy: StrategySpec,
                  segments: list[Stock] | None, admitted: bool) -> tuple[list[Stock], SaleState]:
    """The sale's strategy, window, room and sold-out mark, checked after the claim (so
    that a replay is answered after the end): from the state, with no query; without
    the state, from the row, which the purchase reads anyway. The segments to plan
    the purchase with, and the state if it describes their sale (else ``LOST``).

    The state may refuse on its own: a purchase that meets a reset under way may be
    answered as of either sale. It may not admit on its own: the rows the purchase
    takes from must be of the sale it names (a reset writes the state just before it
    commits the rows), or their own product's terms decide; and the deduction
    takes only from the rows of that sale (``Product.sale``), so a purchase admitted
    by the old terms takes nothing from the new sale.

    :raises Busy: the sale was reset under another strategy meanwhile.
    :raises NotStarted, Ended: outside the sale's window.
    :raises AdmissionRefused: the sale has a waiting room, and no admission was spent.
    :raises SoldOut: the sale's state says it sold out.
    """
    if (opening := state.opening) is not None:
        strategy_confirmed(sku, opening.strategy, strategy)
        opening.window.check(sku=sku, now=time.time())
        if opening.room and not admitted:
            raise admission_refused_error(sku=sku)
    if state.sold_out:
        raise SoldOut(f"{sku}: sold out", extra={"sku": sku, "requested": quantity, "remaining": 0})
    segments = segments or _segments_planned(sku, state)
    product = segments[0].product
    if opening is None or opening.sale != product.sale:
        strategy_confirmed(sku, product.strategy, strategy)
        SaleWindow.of(product).check(sku=sku, now=time.time())
        if not admitted and room_of(product=product):
            raise admission_refused_error(sku=sku)
        # Nothing of the state holds for these rows but its count of returns.
        return segments, replace(LOST, returns=state.returns)
    return segments, state


# sku -> (the sale as its state names it: its opening and its count of returns; and
# its segments as this process last read them): the plan's read, once per sale and
# process, for a minute at most.
_planned: ProcessMemory[str, tuple[tuple[float, int], list[Stock]]] = ProcessMemory(
    "each product's stock segments, by sale", seconds=lambda: 60.0)


def _segments_planned(sku: str, state: SaleState | None) -> list[Stock]:
    """The product's segments to plan a purchase with. The read only orders the tries
    (``stock_plan``): the deduction decides under the lock, and between returns stock
    only falls, so an old read costs at worst a try at a dry segment, and a round
    whose tries all failed reads afresh (``state`` None). The product's id and
    segments change only with a reset, a new sale, and stock rises only with a
    return, which the state counts: one read per sale, return and process serves."""
    sale = (state.opening.at, state.returns) if state is not None and state.opening is not None else None
    known = _planned.get(sku)
    if sale is not None and known is not None and known[0] == sale:
        return known[1]
    segments = segments_get(sku=sku)
    if sale is None and (last := _planned.last(sku)) is not None:
        sale = last[0]  # a fresh read for the sale this process knows
    if sale is not None:
        _planned.put(sku, (sale, segments))
    return segments


def _group_bought(purchase: Purchase, *, product: Product, names: dict[int, str], lock: BaseLock,
                  ) -> tuple[Order, Deducted, Timings]:
    """One try of the plan's: hold ``lock``, the stock locks of the group's segments
    (``names``: segment -> lock name), write the purchase, commit, release.

    :raises SoldOut: the group has too little (rolled back: the plan's next group).
    """
    strategy, group = purchase.strategy, list(names)
    asked = time.perf_counter()
    order = None
    try:
        with stock_locks_held(lock, names, strategy=strategy, sku=product.sku,
                              deadline=purchase.deadline) as held:
            granted = time.perf_counter()
            if strategy.one_trip and len(group) == 1:
                order, deducted = purchase_call(purchase, product=product, segment=group[0])
            else:
                order, deducted = _transaction_committed(purchase, product=product, lock=lock, group=group,
                                                         fences=held.fences)
            # Committed (or, for a lock whose release commits, about to be); only
            # after the release may the next holder read the stock.
            held.committed()
    except CommitFailed as e:
        assert order is not None  # the work was done
        if e.unknown:
            raise outcome_unknown_error(order) from e
        raise Busy("the purchase was rolled back as its lock was released; nothing was written",
                   extra={"lock": lock.name}) from e
    given_up = time.perf_counter()
    held_since = granted if lock.exclusive else deducted.row_held_since
    return order, deducted, Timings(lock_wait_ms=(granted - asked) * 1000,
                                    hold_ms=(given_up - held_since) * 1000)


def _transaction_committed(purchase: Purchase, *, product: Product, lock: BaseLock, group: list[int],
                           fences: dict[int, Fence] | None) -> tuple[Order, Deducted]:
    """The purchase transaction, retried while an optimistic write finds the stock
    changed (each attempt a new transaction, so it reads fresh data)."""
    quantity, key, strategy = purchase.quantity, purchase.key, purchase.strategy
    retries = 0
    while True:
        committing = False
        try:
            # A lock whose release commits (the MySQL locks) opened the transaction:
            # the purchase joins it without a savepoint of its own, so a failure rolls
            # back all of it, the holding included, and two statements fewer run
            # under the lock.
            with transaction.atomic(savepoint=not lock.commits_work):
                quota_take(product=product, user_id=purchase.buyer, quantity=quantity)
                order = Order.objects.create(user_id=purchase.buyer, product=product, quantity=quantity,
                                             idempotency_key=key, instance=settings.FLASHSALE_INSTANCE,
                                             strategy=strategy.name, retries=retries,
                                             request_id=request_id_current(),
                                             **Order.terms(product, timezone.now()))
                deducted = stock_deduct(
                    product=product,
                    quantity=quantity,
                    operation=Operation(key, str(order.pk)),
                    deduction=strategy.deduction,
                    segments=group,
                    fences=fences,
                )
                lock.ensure_held()  # the last moment to find out before commit
                if time.monotonic() > purchase.deadline:
                    # Paused or starved past the deadline: nginx has answered 504 for
                    # this request and its client has moved on; an order committed
                    # now would be one nobody was told of.
                    raise past_deadline_error(product.sku)
                committing = not lock.commits_work  # leaving the block commits
            return order, deducted
        except DatabaseError as e:
            # Past the last statement, a failure is the COMMIT's or that of Django's
            # SET autocommit after it: the commit may have landed, and only the
            # database knows now.
            if committing:
                raise outcome_unknown_error(order) from e
            raise
        except StockChanged as e:
            if retries >= settings.FLASHSALE_OPTIMISTIC_RETRIES:
                raise Busy(f"{product.sku}: stock kept changing; gave up after {retries} retries",
                           extra={"strategy": strategy.name, "retries": retries}) from e
            retries += 1
        except LockLostError as e:
            raise Busy(f"lost the stock lock for {product.sku} before commit; nothing was written",
                       extra={"strategy": strategy.name}) from e
