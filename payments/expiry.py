"""Expiry: an unpaid order's units go back on sale, exactly once, by the sale's own
seller.

An order of a sale with a payment window is born ``pending`` with ``expires_at``.
``orders_expire`` moves the due ones to ``expired`` and gives their units back, per
product, a batch at a time: it claims the due orders with ``FOR UPDATE SKIP LOCKED``
(any number of expirers run at once, each on orders no other holds) and moves them
``pending`` → ``expired`` by one conditional UPDATE (a payment that committed first
leaves the order ``paid``, and this pass skips it), in the transaction in which the
sale's seller gives their units back (``orders.sellers``: the locked transaction
under the sale's stock locks, ``orders.transaction.giveback``; the gate in the
database, then in Redis, ``orders.gate.returns``). Each order's return is a row in
the ledger whose operation flag names the order (unique: no order's units go back
twice). A paid order refunded at the provider gives its units back the same way
(``order_refunded``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from common.database_errors import database_deadlocked
from common.errors import Busy, Unavailable
from common.metrics import count
from common.strategies import strategy_of
from inventory.models import Product
from orders.giveback import Claimed
from orders.models import Order
from orders.sellers import SELLERS, seller_of

from . import metrics

logger = logging.getLogger(__name__)

# Tries of a batch that InnoDB picked as a deadlock's victim.
BATCH_ATTEMPTS = 3


@dataclass
class Expired:
    """What one pass of the expirer did."""

    orders: int = 0
    units: int = 0
    # Products whose due orders this pass could not expire (their lock busy, a server
    # gone): the next pass tries them again.
    deferred: int = 0


def orders_expire(*, batch: int | None = None, now: datetime | None = None,
                  sku: str | None = None) -> Expired:
    """Expire every order whose window ended ``FLASHSALE_PAYMENT_GRACE_S`` before
    ``now`` (default: now), ``batch`` orders per transaction (default:
    ``FLASHSALE_EXPIRY_BATCH``); only ``sku``'s, if given."""
    batch = batch or settings.FLASHSALE_EXPIRY_BATCH
    now = (now or timezone.now()) - timedelta(seconds=settings.FLASHSALE_PAYMENT_GRACE_S)
    done = Expired()
    for seller in SELLERS.values():  # what earlier passes could not finish
        seller.owed_pay()
    due = _products_due_compiled(now=now) if sku is None else products_due(now=now, sku=sku)
    for product in due:
        try:
            while True:
                orders, units = _batch_expire(product, now=now, batch=batch)
                done.orders += orders
                done.units += units
                if orders < batch:
                    break
        except (Busy, Unavailable, DatabaseError) as e:
            logger.warning("%s: orders due not expired in this pass: %s", product.sku, e)
            done.deferred += 1
    return done


def products_due(*, now: datetime, sku: str | None = None) -> QuerySet[Product]:
    """The products whose sales take payments (few) and have an order due by ``now``;
    only ``sku``, if given. Each product's first pending ``expires_at`` is one row of
    the ``order_due`` index, read in its order; asked as ``EXISTS`` (a due order), the
    question became a semi-join that reads every pending order's index row."""
    first_due = (Order.objects.filter(product=OuterRef("pk"), status=Order.Status.PENDING,
                                      expires_at__isnull=False)
                 .order_by("expires_at").values("expires_at")[:1])
    products = Product.objects.filter(payment_window_s__gt=0)
    if sku is not None:
        products = products.filter(sku=sku)
    return products.alias(first_due=Subquery(first_due)).filter(first_due__lte=now).order_by("pk")


# What products_due's statement is compiled with, to find the place of its time.
_MARK = datetime(2000, 1, 1, tzinfo=UTC)


@cache
def _products_due_statement() -> tuple[str, tuple[object, ...]]:
    """``products_due``'s SQL for every product, compiled once, and its parameters but
    the time, which is the last. A long-running expirer asks it every second: built
    and compiled anew, a pass cost several times the CPU of the statement's own round
    trip, the more so after a second asleep."""
    sql, params = products_due(now=_MARK).query.sql_with_params()
    if not params or params[-1] != connection.ops.adapt_datetimefield_value(_MARK):
        raise AssertionError(f"products_due's time is not its statement's last parameter: {params}")
    return sql, tuple(params[:-1])


def _products_due_compiled(*, now: datetime) -> Iterable[Product]:
    """``products_due(now=now)``, by its statement compiled once."""
    sql, params = _products_due_statement()
    return Product.objects.raw(sql, [*params, connection.ops.adapt_datetimefield_value(now)])


def expiry_pass(*, batch: int | None = None, sweep: bool = False) -> Expired:
    """One pass of a long-running expirer (``manage.py expire_orders``): with ``sweep``,
    every seller's ``owed_sweep`` first (what any expirer left owed); then
    ``orders_expire``. A connection the database dropped (a restart, an idle timeout)
    is closed first, and the pass connects anew: left open, every later pass would
    fail on it."""
    close_old_connections()
    if sweep and (given := sum(seller.owed_sweep() for seller in SELLERS.values())):
        logger.warning("gave back %d expired or refunded orders' units their sales were owed", given)
    return orders_expire(batch=batch)


def _batch_expire(product: Product, *, now: datetime, batch: int) -> tuple[int, int]:
    for attempt in range(1, BATCH_ATTEMPTS + 1):
        try:
            return _batch_expire_once(product, now=now, batch=batch)
        except DatabaseError as e:
            if not database_deadlocked(e) or attempt == BATCH_ATTEMPTS:
                raise
            logger.info("%s: an expiry batch was a deadlock's victim (try %d), again", product.sku, attempt)
    raise AssertionError("unreachable")


def _batch_expire_once(product: Product, *, now: datetime, batch: int) -> tuple[int, int]:
    return _units_back(product, take=lambda: _claimed(product, now=now, batch=batch))


def order_refunded(*, order: Order, claim: Callable[[], bool]) -> str:
    """A paid order whose payment the provider refunded (the shop's operator, say):
    ``paid`` → ``refunded``, its buyer's limit freed, and its units back on sale once,
    by the sale's strategy, as an expiry gives an unpaid order's (a ``return`` row
    flagged ``refund <order id>``), in the transaction that runs ``claim`` first.

    :returns: ``refunded``; ``duplicate`` (``claim`` said the event was handled);
        ``not_paid`` (nothing to give back; the claim stands).
    :raises Busy, Unavailable: the stock locks were not had, or their release (the
        commit, under the MySQL locks) failed: the provider delivers again.
    """
    claimed: dict[str, bool] = {}

    def take() -> list[Claimed]:
        claimed["event"] = claim()
        return _paid_claimed(order.pk) if claimed["event"] else []

    orders, _ = _units_back(order.product, take=take, refunded=True)
    return "refunded" if orders else "not_paid" if claimed["event"] else "duplicate"


def _units_back(product: Product, *, take: Callable[[], list[Claimed]], refunded: bool = False,
                ) -> tuple[int, int]:
    """Move the orders ``take`` claims, in the transaction it runs in, and give their
    units back to the sale by its seller (``orders.sellers``): (orders, units).
    ``refunded``: paid orders refunded (a failed commit reaches the caller);
    otherwise expired ones (an expiry's next pass does what a failed commit left)."""
    strategy = strategy_of(product.strategy)
    with _in_hand() as hand:
        orders, units = seller_of(strategy).give_back(product, take=take, refunded=refunded, hand=hand)
    if orders:
        _counted(strategy.name, orders, units, refunded=refunded)
    return orders, units


def _claimed(product: Product, *, now: datetime, batch: int) -> list[Claimed]:
    """Claim up to ``batch`` due orders of ``product`` (``FOR UPDATE SKIP LOCKED``: none
    another expirer holds) and move them ``pending`` → ``expired``, in the caller's
    transaction: (id, buyer, quantity, key) each."""
    claimed = list(Order.objects.select_for_update(skip_locked=True)
                   .filter(product=product, status=Order.Status.PENDING, expires_at__lte=now)
                   .order_by("expires_at")
                   .values_list("pk", "user_id", "quantity", "idempotency_key")[:batch])
    if claimed:
        moved = (Order.objects.filter(pk__in=[pk for pk, *_ in claimed], status=Order.Status.PENDING)
                 .update(status=Order.Status.EXPIRED))
        if moved != len(claimed):  # they are ours, locked: nobody else could move them
            raise RuntimeError(f"{product.sku}: claimed {len(claimed)} orders, moved {moved}")
    return claimed


def _paid_claimed(order_id: int) -> list[Claimed]:
    """Claim the order if it is paid, and move it ``paid`` → ``refunded``, in the
    caller's transaction: as ``_claimed`` (one or none)."""
    claimed = list(Order.objects.select_for_update().filter(pk=order_id, status=Order.Status.PAID)
                   .values_list("pk", "user_id", "quantity", "idempotency_key"))
    if claimed:
        Order.objects.filter(pk=order_id).update(status=Order.Status.REFUNDED)
    return claimed


@contextmanager
def _in_hand() -> Iterator[Callable[[int], None]]:
    """Yields ``hand(orders)``, called once a batch is claimed and before its units are
    back everywhere: it sets the expirer's gauge, and pauses there
    ``FLASHSALE_EXPIRY_PAUSE_MS`` (0: not at all; the verdicts widen it to kill an
    expirer mid-batch). The gauge goes back to 0 on the way out."""
    def hand(orders: int) -> None:
        metrics.BATCH_IN_HAND.set(orders)
        if settings.FLASHSALE_EXPIRY_PAUSE_MS > 0:
            time.sleep(settings.FLASHSALE_EXPIRY_PAUSE_MS / 1000)

    try:
        yield hand
    finally:
        metrics.BATCH_IN_HAND.set(0)


def _counted(strategy: str, orders: int, units: int, *, refunded: bool = False) -> None:
    if not refunded:
        count(metrics.EXPIRED, strategy, amount=orders)
    count(metrics.RETURNED_UNITS, strategy, amount=units)
