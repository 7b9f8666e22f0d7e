"""The transaction seller's units going back to a sale and taken out again: an
expiry's or a refund's return (``transaction_give_back``) and a late payment's take
(``transaction_take_again``), each under the sale's stock locks, as a purchase of
every segment would take them (a lock strategy's read-modify-write purchase that
read the stock before an increment would write over it; ``atomic`` and
``optimistic`` take the null lock: their deductions never write a value they read,
so one increment is safe beside them). The caller (``payments``) claims the orders
and moves their status; this module moves their units."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable

from django.conf import settings
from django.db import transaction

from common.errors import Busy, LimitReached, SoldOut, StockChanged
from common.strategies import StrategySpec, strategy_of
from inventory.models import Product, Stock
from inventory.selectors import segments_get
from inventory.services import Fence, Operation, stock_deduct
from locking import get_locks

from ..giveback import Claimed, OrderChanged, order_moved, read_committed, resale_flag, units_return
from ..models import Order
from ..quota import quota_free, quota_open, quota_take
from ..salestate import sale_state_returned
from ..stocklocks import CommitFailed, lock_name, stock_locks_held
from .plan import StockPlan

logger = logging.getLogger(__name__)


def transaction_give_back(product: Product, *, take: Callable[[], list[Claimed]], refunded: bool,
                          hand: Callable[[int], None]) -> tuple[int, int]:
    """Under the sale's stock locks, in one transaction: the orders ``take`` claims
    (and moves), their buyers' limits freed, their units back in the segments that
    hold them (a ``return`` or ``refund`` row each); commit, release the locks. The
    return is counted in the sale's state twice: before the commit, so that no
    sold-out mark written before the return holds once its units can be seen; and
    after it, so that neither does one written by a purchase that found the stock
    empty in between. ``hand`` hears how many orders are claimed before their units move.
    Returns (orders, units).

    :raises Busy: ``refunded``, and the release of a lock that commits failed (the
        caller hears it); an expiry's next pass does what a failed commit left.
    """
    strategy = strategy_of(product.strategy)
    segments = list(Stock.objects.filter(product=product).order_by("segment")
                    .values_list("segment", flat=True))
    names = {segment: lock_name(product.sku, segment, len(segments)) for segment in segments}
    lock = get_locks(names.values(), alias=strategy.lock)
    if not lock.commits_work:
        read_committed()
    units = 0
    claimed: list[Claimed] = []
    try:
        with stock_locks_held(lock, names, strategy=strategy, sku=product.sku) as held:
            with transaction.atomic(savepoint=not lock.commits_work):
                claimed = take()
                if claimed:
                    _quotas_free(product, claimed)
                    units = units_return(product, claimed, held.fences, refunded=refunded)
                    hand(len(claimed))
                    lock.ensure_held()
                    _state_returned(product.sku)  # and again after the commit: see the docstring
            held.committed()  # or, for a lock whose release commits, about to be
    except CommitFailed as e:
        if refunded:  # the provider delivers again
            raise Busy(str(e)) from e
        # Decided already: rolled back or unknown. Either way the orders' statuses
        # say which, and the next pass takes whatever is still due.
        logger.warning("%s", e)
    if claimed:
        _state_returned(product.sku)
    return len(claimed), units


def _quotas_free(product: Product, claimed: list[Claimed]) -> None:
    units: dict[str, int] = defaultdict(int)
    for _, user_id, quantity, _ in claimed:
        units[user_id] += quantity
    quota_free(product=product, units=units)


# The skus whose last return this process could not count in the sale's state: until
# it is counted, a sold-out mark may refuse purchases of the returned units.
# ``transaction_owed_pay`` tries again.
_uncounted: set[str] = set()


def _state_returned(sku: str) -> None:
    if sale_state_returned(sku=sku):
        _uncounted.discard(sku)
    else:
        logger.error("%s: a return was not counted in the sale's state; the next pass tries again", sku)
        _uncounted.add(sku)


def transaction_owed_pay() -> None:
    """Count in the sales' states the returns this process could not count there."""
    for uncounted in sorted(_uncounted):
        _state_returned(uncounted)


def transaction_take_again(order: Order, *, claim: Callable[[], bool] = lambda: True,
                           then: Callable[[], None] = lambda: None) -> str | None:
    """Take an expired order's units out of the stock again (its payment came late),
    as a purchase of the sale would take them (``StockPlan``: each group of segments
    the plan names, under its locks): its buyer's quota counted again, the
    strategy's own deduction (a ``sale`` row flagged ``resale <order id>``), and
    ``expired`` → ``paid``, in one transaction that also runs ``claim`` first (False:
    the payment was recorded before; nothing is done) and ``then`` last.

    :returns: ``paid_late``; ``duplicate`` (``claim`` said so); None when the stock or
        the buyer's limit has no room (nothing written: the payment is to be refunded).
    :raises OrderChanged: the order is no longer expired.
    :raises Busy, Unavailable: a lock was not had; or its release, the commit of a
        MySQL lock, failed (rolled back, or not known: the event's next delivery tells).
    """
    product = order.product
    quota_open(product=product, user_id=order.user_id)
    try:
        for attempt in StockPlan(segments_get(sku=product.sku), order.quantity,
                                 reread=lambda: segments_get(sku=product.sku)):
            with attempt:
                return _group_retaken(order, group=attempt.group, count=attempt.count, claim=claim, then=then)
    except (SoldOut, LimitReached):
        return None
    raise AssertionError("a plan ends in a try that moved the stock, or raises")


def _group_retaken(order: Order, *, group: list[int], count: int, claim: Callable[[], bool],
                   then: Callable[[], None]) -> str:
    """One try of the plan's: lock the group's segments, take the units, commit, release.

    :raises SoldOut: the group has no room (rolled back: the next group).
    :raises LimitReached: the buyer's limit has no room (rolled back).
    """
    product = order.product
    strategy = strategy_of(product.strategy)
    names = {segment: lock_name(product.sku, segment, count) for segment in group}
    lock = get_locks(names.values(), alias=strategy.lock)
    try:
        with stock_locks_held(lock, names, strategy=strategy, sku=product.sku) as held:
            for _ in range(settings.FLASHSALE_OPTIMISTIC_RETRIES + 1):
                try:
                    outcome = _retaken(order, strategy, group, held.fences, claim, then)
                    lock.ensure_held()
                    break
                except StockChanged:
                    continue
            else:
                raise Busy(f"{product.sku}: stock kept changing while a late payment took its units")
            held.committed()
    except CommitFailed as e:
        # Rolled back, or nobody here knows. The webhook answers 503, and the provider
        # delivers again: the event's claim makes a payment that did land count once.
        raise Busy(f"{product.sku}: the late payment's commit, its lock's release, failed; "
                   "the provider delivers again") from e
    return outcome


def _retaken(order: Order, strategy: StrategySpec, group: list[int], fences: dict[int, Fence] | None,
             claim: Callable[[], bool], then: Callable[[], None]) -> str:
    with transaction.atomic():
        if not claim():
            return "duplicate"
        if not order_moved(order.pk, Order.Status.EXPIRED, Order.Status.PAID):
            raise OrderChanged
        quota_take(product=order.product, user_id=order.user_id, quantity=order.quantity)
        stock_deduct(product=order.product, quantity=order.quantity,
                     operation=Operation(resale_flag(order.pk), str(order.pk)),
                     deduction=strategy.deduction, segments=group, fences=fences)
        then()
    return "paid_late"
