"""Expiry: an unpaid order's units go back on sale, exactly once, by the sale's own
strategy.

An order of a sale with a payment window is born ``pending`` with ``expires_at``.
``orders_expire`` moves the due ones to ``expired`` and returns their units, per
product, in one transaction per batch:

1. take the product's stock locks, as a purchase of every segment would (a lock
   strategy's read-modify-write purchase that read the stock before an increment
   would write over it; ``atomic`` and ``optimistic`` take the null lock: their
   deductions never write a value they read, so one increment is safe beside them);
2. claim the due orders with ``FOR UPDATE SKIP LOCKED``: any number of expirers run
   at once, each on orders no other holds;
3. move them ``pending`` → ``expired`` by one conditional UPDATE: a payment that
   committed first leaves the order ``paid``, and this pass skips it;
4. free the buyers' per-user quota, and give each segment back what the orders took
   from it (``stock_return``), with a ``return`` row each in the ledger, whose
   operation flag names the order (unique: no order's units go back twice);
5. commit, then release the locks, then count the return in the sale's state so no
   sold-out mark written before it holds.

The claim runs under READ COMMITTED, so that it locks the due orders only, and not
the gap where purchases insert new ones.

Under the gate the database moves first (steps 2 to 4, without a lock: the
persisters only decrement the stock row, conditionally), then Redis's stock takes
the units back (``orders.gate.returns``), once per order by its marker there.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, close_old_connections, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from common.database_errors import database_deadlocked
from common.errors import Busy, Unavailable
from common.metrics import count
from common.strategies import Seller, strategy_of
from inventory.models import Product, Stock
from locking import get_locks
from orders.gate.returns import Owed, gate_return
from orders.giveback import read_committed, units_return
from orders.models import GateSale, Order
from orders.quota import quota_free
from orders.salestate import sale_state_returned
from orders.stocklocks import CommitFailed, lock_name, stock_locks_held

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
    for uncounted in sorted(_uncounted):  # what earlier passes could not finish
        _state_returned(uncounted)
    for owed in sorted(_owed):
        _owe(owed, [])
    # The products whose sales take payments (few), each asked whether it has a due
    # order: one probe of the order_due index each.
    products = Product.objects.filter(payment_window_s__gt=0)
    if sku is not None:
        products = products.filter(sku=sku)
    due = Order.objects.filter(product=OuterRef("pk"), status=Order.Status.PENDING, expires_at__lte=now)
    for product in products.filter(Exists(due)).order_by("pk"):
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


def expiry_pass(*, batch: int | None = None, sweep: bool = False) -> Expired:
    """One pass of a long-running expirer (``manage.py expire_orders``): with ``sweep``,
    ``gate_owed_sweep`` first; then ``orders_expire``. A connection the database dropped
    (a restart, an idle timeout) is closed first, and the pass connects anew: left
    open, every later pass would fail on it."""
    close_old_connections()
    if sweep and (given := gate_owed_sweep()):
        logger.warning("gave back %d expired orders' units the gate's Redis was owed", given)
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
    claimed: dict = {}

    def take() -> list[tuple]:
        claimed["event"] = claim()
        return _paid_claimed(order.pk) if claimed["event"] else []

    orders, _ = _units_back(order.product, take=take, refunded=True)
    return "refunded" if orders else "not_paid" if claimed["event"] else "duplicate"


def _units_back(product: Product, *, take: Callable[[], list[tuple]], refunded: bool = False,
                ) -> tuple[int, int]:
    """Move the orders ``take`` claims, in the transaction it runs in, and give their
    units back to the sale by its strategy: (orders, units). ``refunded``: paid orders
    refunded (their lock's release must commit, or the caller hears it); otherwise
    expired ones (an expiry's next pass does what a failed commit left)."""
    strategy = strategy_of(product.strategy)
    if strategy.seller is Seller.GATE:
        return _gate_units_back(product, take=take, refunded=refunded, strategy=strategy.name)
    segments = list(Stock.objects.filter(product=product).order_by("segment")
                    .values_list("segment", flat=True))
    names = {segment: lock_name(product.sku, segment, len(segments)) for segment in segments}
    lock = get_locks(names.values(), alias=strategy.lock)
    if not lock.commits_work:
        read_committed()
    units = 0
    try:
        with stock_locks_held(lock, names, strategy=strategy, sku=product.sku) as held:
            with transaction.atomic(savepoint=not lock.commits_work), _in_hand() as hand:
                claimed = take()
                if claimed:
                    _quotas_free(product, claimed)
                    units = units_return(product, claimed, held.fences, refunded=refunded)
                    hand(len(claimed))
                    lock.ensure_held()
            held.committed()  # or, for a lock whose release commits, about to be
    except CommitFailed as e:
        if refunded:  # the provider delivers again
            raise Busy(str(e)) from e
        # Decided already: rolled back or unknown. Either way the orders' statuses
        # say which, and the next pass takes whatever is still due.
        logger.warning("%s", e)
    if claimed:
        _state_returned(product.sku)
        _counted(strategy.name, len(claimed), units, refunded=refunded)
    return len(claimed), units


def _claimed(product: Product, *, now: datetime, batch: int) -> list[tuple]:
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


def _paid_claimed(order_id: int) -> list[tuple]:
    """Claim the order if it is paid, and move it ``paid`` → ``refunded``, in the
    caller's transaction: as ``_claimed`` (one or none)."""
    claimed = list(Order.objects.select_for_update().filter(pk=order_id, status=Order.Status.PAID)
                   .values_list("pk", "user_id", "quantity", "idempotency_key"))
    if claimed:
        Order.objects.filter(pk=order_id).update(status=Order.Status.REFUNDED)
    return claimed


def _gate_units_back(product: Product, *, take: Callable[[], list[tuple]], refunded: bool,
                     strategy: str) -> tuple[int, int]:
    """The gate's: the database first (the orders moved, their units back in the stock
    row, a return row each), then Redis's stock (``gate_return``), whose markers make
    a repeated return do nothing. No lock: the persisters' writes to the stock row are
    conditional decrements, and Redis decides the sale. Redis unreachable after the
    commit: the units are owed to it; each pass gives an expiry's again, and the
    sweep gives every one's."""
    read_committed()
    with _in_hand() as hand:
        with transaction.atomic():
            claimed = take()
            units = units_return(product, claimed, fences=None, refunded=refunded) if claimed else 0
        if claimed:
            hand(len(claimed))  # moved in the database, not yet back in Redis
            owed = [Owed(pk, quantity, user_id) for pk, user_id, quantity, _ in claimed]
            if refunded:
                try:
                    gate_return(sku=product.sku, orders=owed, refunded=True)
                except Unavailable as e:
                    logger.error("%s: a refunded order's units not given back to the gate's Redis yet (%s); "
                                 "the sweep gives them", product.sku, e)
            else:
                _owe(product.sku, owed)
            _counted(strategy, len(claimed), units, refunded=refunded)
    return len(claimed), units


@contextmanager
def _in_hand():
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


# sku -> the orders whose units this process owes the gate's Redis: expired in the
# database, not yet given back there (Redis was unreachable). Each pass pays them.
_owed: dict[str, dict[int, Owed]] = {}


def _owe(sku: str, orders: list[Owed]) -> None:
    owed = _owed.setdefault(sku, {})
    owed.update({order.order_id: order for order in orders})
    try:
        done = gate_return(sku=sku, orders=owed.values())
    except Unavailable as e:
        logger.error("%s: %d orders' units not given back to the gate's Redis yet (%s); the next pass "
                     "tries again", sku, len(owed), e)
        return
    # A sale on another server than opened it is to be rebuilt: its units are owed to
    # the sale the rebuild opens, which adopts their orders (the next pass).
    if waiting := {pk: order for pk, order in owed.items() if done.get(pk) == "failover"}:
        _owed[sku] = waiting
        logger.info("%s: %d orders' units wait for the gate's sale to be rebuilt", sku, len(waiting))
    else:
        del _owed[sku]
    if other := sorted(order for order, outcome in done.items() if outcome == "other"):
        # Neither of the sale Redis holds nor of one it adopted: a sale opened from
        # the database since, which holds their units already (a reset deletes them).
        logger.warning("%s: orders %s are not of the gate's sale in Redis: their units were not given back "
                       "there", sku, other)


def gate_owed_sweep() -> int:
    """Give back to the gate's Redis every expired or refunded order's units of the
    sales it holds, and of the sales they adopted (a rebuild's), that no marker says
    were given back or taken again: what an expirer that stopped between its commit
    and Redis left owed, or a refund Redis did not answer. Returns how many it gave
    back."""
    given = 0
    for sale in GateSale.objects.filter(superseded_at__isnull=True, product__payment_window_s__gt=0) \
            .select_related("product"):
        # Every order of the product is of this sale or of one it replaced (a reset
        # deletes the orders with the sales): the script tells them apart.
        for status, refunded in ((Order.Status.EXPIRED, False), (Order.Status.REFUNDED, True)):
            owed = [Owed(pk, quantity, user_id) for pk, quantity, user_id in
                    Order.objects.filter(product=sale.product, status=status)
                    .values_list("pk", "quantity", "user_id")]
            if owed:
                done = gate_return(sku=sale.product.sku, orders=owed, refunded=refunded)
                given += sum(1 for outcome in done.values() if outcome == "returned")
    return given


def _counted(strategy: str, orders: int, units: int, *, refunded: bool = False) -> None:
    if not refunded:
        count(metrics.EXPIRED, strategy, amount=orders)
    count(metrics.RETURNED_UNITS, strategy, amount=units)


def _quotas_free(product: Product, claimed: list[tuple]) -> None:
    units: dict[str, int] = defaultdict(int)
    for _, user_id, quantity, _ in claimed:
        units[user_id] += quantity
    quota_free(product=product, units=units)


# The skus whose last return this process could not count in the sale's state: until
# it is counted, a sold-out mark may refuse purchases of the returned units. Each
# pass tries again.
_uncounted: set[str] = set()


def _state_returned(sku: str) -> None:
    if sale_state_returned(sku=sku):
        _uncounted.discard(sku)
    else:
        logger.error("%s: a return was not counted in the sale's state; the next pass tries again", sku)
        _uncounted.add(sku)
