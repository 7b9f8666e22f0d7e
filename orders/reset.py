"""The reset: a product's sale opened afresh, under its strategy, window, payment
window and waiting room. (The gate's warm-up after Redis lost a sale, and its
hand-over to the database when the deployment's strategy leaves the gate:
``orders.gate.lifecycle``.)"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction

from common.database_errors import database_deadlocked
from common.errors import InvalidInput, NotFound, Unavailable
from common.strategies import UnknownStrategy, strategy_of
from inventory.models import Product
from inventory.reads import product_cached_refresh
from inventory.selectors import product_get
from inventory.services import product_reset
from waitingroom.models import Room
from waitingroom.services import RoomTerms, room_open, room_set

from .gate.lifecycle import (
    gate_close,
    gate_open,
    gate_settle,
)
from .idempotency import flags_forget
from .models import BuyerQuota, GateSale, Order
from .salestate import sale_state_forget, sale_state_open
from .sellers import seller_of
from .watch import sale_watched
from .window import SaleWindow

logger = logging.getLogger(__name__)


# Past six parameters: a sale's terms, each a field of the reset API.
def sale_reset(*, sku: str, stock: int, name: str | None = None, segments: int | None = None,  # noqa: PLR0913
               starts_at: datetime | None = None, ends_at: datetime | None = None,
               strategy: str | None = None, payment_window_s: int = 0,
               room: RoomTerms | None = None) -> Product:
    """Create or reset a product to ``stock`` units in ``segments`` rows, clearing its
    orders and ledger; under the gate, load the stock into Redis as a new sale. The
    sale opens at ``starts_at`` (default: at once) and closes at ``ends_at`` (never);
    an end at or before the start or now makes a closed sale (a way to close one).
    It runs under ``strategy``; without one, under the deployment's
    (``FLASHSALE_STRATEGY``, whatever it is when a purchase comes). With
    ``payment_window_s``, each order waits that long for its payment, and its units go
    back on sale if it is not paid (``payments``). With ``room``, buyers ask the sale's
    waiting room for places and are admitted as it says (``waitingroom``).

    :raises InvalidInput: an unknown strategy; segments for a strategy that keeps the
        stock in one counter.
    :raises Unavailable: the gate's Redis, or the waiting room's, cannot be reached
        (the sale is not open); the sale's state cannot be written (nothing was reset).
    """
    try:
        own = strategy_of(strategy or "")
    except UnknownStrategy as e:
        raise InvalidInput(str(e), extra={"fields": {"strategy": [str(e)]}}) from None
    # In whole milliseconds, as the gate's script keeps them: one window everywhere.
    starts_at, ends_at = (t and t.replace(microsecond=t.microsecond // 1000 * 1000)
                          for t in (starts_at, ends_at))
    gated = seller_of(own).in_redis
    if gated and (segments or 1) > 1:
        raise InvalidInput("the gate keeps a product's stock in one Redis counter: segments are for the "
                           "strategies that lock the database's stock rows",
                           extra={"fields": {"segments": ["must be 1 under the gate"]}})
    # First, so that no purchase is accepted into the sale being wiped: until the new
    # one opens, the product is cold (503).
    closed = gate_close(sku=sku, required=gated or GateSale.objects.filter(product__sku=sku).exists())
    try:
        product, keys, sale, replaced, (opened, had_room) = _reset_rows_tried(
            sku=sku, stock=stock, name=name, segments=segments, gated=gated, starts_at=starts_at,
            ends_at=ends_at, strategy=strategy, payment_window_s=payment_window_s, room=room)
    except BaseException:
        # Its state may name a sale that did not commit: without it, purchases read
        # the rows, whatever the commit did.
        sale_state_forget(sku=sku)
        raise
    flags_forget(keys=keys)
    room_open(product=product, room=opened, had=had_room)
    window = SaleWindow.of(product)
    sale_watched(sku=sku)
    settled = closed
    if replaced is not None and strategy_of(replaced) != strategy_of(product.strategy):
        # Processes resolve the old strategy from memory until this long after the
        # new one is written (orders.resolve.strategy_resolve): none does after
        # this answer.
        settled = max(settled, time.monotonic() + settings.FLASHSALE_STRATEGY_MEMORY_S)
    if sale is not None:
        gate_open(sale=sale, window=window)
    product_cached_refresh(sku=sku)
    gate_settle(settled)  # no process answers from the old sale after this answer
    return product


# Tries of a reset's transaction, for a deadlock's victim.
RESET_ATTEMPTS = 3

_Reset = tuple[Product, list[str], GateSale | None, str | None, tuple[Room | None, bool]]


def _reset_rows_tried(*, sku: str, **terms: Any) -> _Reset:
    """``_reset_rows``, done again while it is a deadlock's victim."""
    for attempt in range(1, RESET_ATTEMPTS + 1):
        try:
            return _reset_rows(sku=sku, **terms)
        except DatabaseError as e:
            # Its deletes take gap locks beside the rows the persisters and buyers of
            # other products insert, so InnoDB may pick it as a deadlock's victim; or
            # a reset of the same new product created it first. All of it was rolled
            # back: done again (another failure reaches the caller, 503).
            outer = transaction.get_connection().in_atomic_block  # then the victim is the caller's
            if not (database_deadlocked(e) or isinstance(e, IntegrityError)) or outer \
                    or attempt == RESET_ATTEMPTS:
                raise
            why = "a deadlock's victim" if database_deadlocked(e) else "beaten to the new product's row"
            logger.info("%s: the reset was %s (try %d), doing it again", sku, why, attempt)
    raise AssertionError("unreachable: the last try raises")


@transaction.atomic
# Past six parameters: a sale's terms, each a field of the reset API.
def _reset_rows(*, sku: str, stock: int, name: str | None, segments: int | None, gated: bool,  # noqa: PLR0913
                starts_at: datetime | None, ends_at: datetime | None, strategy: str | None,
                payment_window_s: int, room: RoomTerms | None) -> _Reset:
    """The reset's rows, in one transaction: the sale's orders and quotas gone, the
    product, its stock and its room as new. Returns the product, the keys of the
    orders it deleted, the gate sale it opened (under the gate), the strategy the
    product had before (None: a new product), and its room (``room_set``)."""
    try:
        existing = product_get(sku=sku)
    except NotFound:
        existing = None  # nothing refers to it: no deletes, so no locks at the indexes' ends
    keys = []
    if existing is not None:
        # Before the orders: this waits for a persister's batch of the product to
        # commit (it holds the sale's row), and then deletes what it wrote.
        GateSale.objects.filter(product=existing).delete()
        orders = Order.objects.filter(product=existing)
        keys = list(orders.values_list("idempotency_key", flat=True))
        orders.delete()
        BuyerQuota.objects.filter(product=existing).delete()
    product = product_reset(sku=sku, stock=stock, name=name, segments=1 if gated else segments,
                            starts_at=starts_at, ends_at=ends_at, strategy=strategy or "",
                            payment_window_s=payment_window_s, new=existing is None)
    sale = GateSale.objects.create(product=product, loaded_stock=stock) if gated else None
    opened, had_room = room_set(product=product, terms=room)
    # Last before the commit, so that whatever reads the new rows finds their state
    # (it names this sale; a purchase trusts a state only for the rows of the sale it
    # names), and a reset that cannot write it writes nothing.
    if not sale_state_open(sku=sku, sale=product.sale, window=SaleWindow.of(product),
                           strategy=product.strategy, room=opened is not None):
        raise Unavailable(f"{sku}: the sale's state cannot be written to Redis; nothing was reset",
                          backend="redis")
    return product, keys, sale, None if existing is None else existing.strategy, (opened, had_room)
