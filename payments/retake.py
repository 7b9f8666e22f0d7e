"""A late payment's units taken again under the locked sellers (every strategy but
the gate, whose late payment is ``payments.services``'): under the sale's stock
locks, as a purchase of the sale would take them, in the transaction that records
the payment; and the order's one conditional move."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.db import transaction

from common.errors import Busy, LimitReached, SoldOut, StockChanged
from common.metrics import count
from common.strategies import strategy_of
from inventory.models import Product
from inventory.selectors import segments_get
from inventory.services import Operation, stock_deduct, stock_plan
from locking import get_locks
from orders.giveback import OrderChanged, order_moved, resale_flag
from orders.models import Order
from orders.quota import quota_open, quota_take
from orders.stocklocks import CommitFailed, lock_name, stock_locks_held

from . import metrics


def order_retake(*, order: Order, claim: Callable[[], bool] = lambda: True,
                 then: Callable[[], None] = lambda: None) -> str | None:
    """Take an expired order's units out of the stock again (its payment came late):
    under the sale's stock locks, its buyer's quota counted again, the strategy's own
    deduction (a ``sale`` row flagged ``resale <order id>``), and ``expired`` →
    ``paid``, in one transaction that also runs ``claim`` first (False: the payment
    was recorded before; nothing is done) and ``then`` last.

    :returns: ``paid_late``; ``duplicate`` (``claim`` said so); None when the stock or
        the buyer's limit has no room (nothing written: the payment is to be refunded).
    :raises OrderChanged: the order is no longer expired.
    :raises Busy, Unavailable: the lock was not had; or its release, the commit of a
        MySQL lock, failed (rolled back, or not known: the event's next delivery tells).
    """
    product = order.product
    strategy = strategy_of(product.strategy)
    segments = segments_get(sku=product.sku)
    names = {s.segment: lock_name(product.sku, s.segment, len(segments)) for s in segments}
    quota_open(product=product, user_id=order.user_id)
    lock = get_locks(names.values(), alias=strategy.lock)
    try:
        with stock_locks_held(lock, names, strategy=strategy, sku=product.sku) as held:
            for _ in range(settings.FLASHSALE_OPTIMISTIC_RETRIES + 1):
                try:
                    outcome = _retake(order, product, strategy, held.fences, claim, then)
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
    if outcome == "paid_late":
        count(metrics.PAID, order.strategy)
        count(metrics.LATE, "paid")
    return outcome


def _retake(order: Order, product: Product, strategy, fences, claim, then) -> str | None:
    try:
        with transaction.atomic():
            if not claim():
                return "duplicate"
            if not order_moved(order.pk, Order.Status.EXPIRED, Order.Status.PAID):
                raise OrderChanged
            quota_take(product=product, user_id=order.user_id, quantity=order.quantity)
            for group in stock_plan(segments_get(sku=product.sku), order.quantity):
                try:
                    stock_deduct(product=product, quantity=order.quantity,
                                 operation=Operation(resale_flag(order.pk), str(order.pk)),
                                 deduction=strategy.deduction, segments=group, fences=fences)
                    break
                except SoldOut:
                    continue
            else:
                raise SoldOut(f"{product.sku}: no room for a late payment")
            then()
    except (SoldOut, LimitReached):
        return None
    return "paid_late"
