"""The conditional UPDATE's purchase in one round trip: a stored procedure.

``atomic`` runs no Python between the statements of its transaction: no lock to
check, no value to compute, no token to compare. So the whole transaction (the
buyer's quota, the order, the stock's conditional UPDATE, the ledger row, the commit)
can run inside MariaDB as one ``CALL flashsale_purchase(...)``: the procedure is
``orders/transaction/sql/purchase.*.sql``, which calls inventory's
``inventory/sql/stock_take.*.sql`` for the stock; migrations load both, and
``orders/tests/test_procedure_equivalence.py`` holds them to the ORM's path. Through
the ORM the same purchase costs eight round trips (``SET autocommit``, four
statements, ``COMMIT``, ``SET autocommit``), each paid by this process, by MariaDB
and by a thread switch; on one hot row the row is also held across each of them. The
seckill peers do the same (a stored procedure for the deduction and the order).

The answer stays as true as the ORM's:
- refused (sold out, the buyer's limit, past the deadline, a duplicate key): the
  procedure rolled back whatever it wrote, and says why;
- a connection lost during the ``CALL``: the ``COMMIT`` inside it may have run, so the
  outcome is unknown (``OutcomeUnknown``) and a retry with the key learns it.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import NamedTuple

from django.conf import settings
from django.db import DatabaseError, transaction
from MySQLdb.constants import ER

from common.database_errors import database_never_connected, database_unreachable
from common.errors import Busy, LimitReached, OutcomeUnknown, SaleReplaced, SoldOut
from common.requestlog import request_id_current
from inventory.faults import stall_point
from inventory.models import Product
from inventory.services import Deducted

from ..models import Order
from ..results import Purchase


def past_deadline_error(sku: str) -> Busy:
    """The refusal of a purchase that ran past its deadline before it committed: nginx
    has answered 504 for it and its client has moved on."""
    return Busy(f"{sku}: the purchase ran past its deadline; nothing was written")


class _Reply(NamedTuple):
    outcome: str  # "placed", "sold_out", "limit_reached" or "replaced"
    order_id: int | None
    remaining: int | None  # the segment's, after the purchase (sold out: as it is; limit: None)
    held_us: int  # the stock row, from its UPDATE to the commit
    expires_at: datetime | None  # placed in a sale with a payment window: when it expires


# The procedure's parameters (orders/transaction/sql/purchase.0013.sql), in its order.
_CALL = f"CALL flashsale_purchase({', '.join(['%s'] * 14)})"


def purchase_call(purchase: Purchase, *, product: Product, segment: int) -> tuple[Order, Deducted]:
    """Place the purchase's order and take its quantity from ``segment`` in one ``CALL``.

    :raises SoldOut: the segment has less than ``quantity``; nothing was written.
    :raises LimitReached: the buyer's limit has no room; nothing was written.
    :raises SaleReplaced: a reset replaced ``product``'s sale (its ``sale`` as read)
        meanwhile; nothing was written.
    :raises Busy: past the purchase's deadline; nothing was written.
    :raises OutcomeUnknown: the connection died during the call.
    :raises IntegrityError: the key has an order already; nothing was written.
    """
    stall_point("start")  # fault injection: before the stock is touched
    quantity, user_id, key, strategy = purchase.quantity, purchase.buyer, purchase.key, purchase.strategy.name
    budget_us = int((purchase.deadline - time.monotonic()) * 1_000_000)
    if budget_us <= 0:
        raise past_deadline_error(product.sku)
    connection = transaction.get_connection()
    nested = connection.in_atomic_block  # then a savepoint in the caller's transaction
    request = request_id_current()  # kept on the order
    args = [product.pk, segment, quantity, user_id, key, settings.FLASHSALE_INSTANCE, strategy,
            settings.FLASHSALE_PER_USER_LIMIT, int(settings.FLASHSALE_SECTION_DELAY_MS * 1000), budget_us,
            nested, product.payment_window_s, request, product.sale]
    try:
        with connection.cursor() as cursor:
            cursor.execute(_CALL, args)
            reply = _Reply(*cursor.fetchone())
            while cursor.nextset():  # the CALL's own status, after the row
                pass
    except DatabaseError as e:
        if e.args and e.args[0] == ER.SIGNAL_EXCEPTION:  # the procedure's SIGNAL: past the deadline
            raise past_deadline_error(product.sku) from e
        if nested or database_never_connected(e) or not database_unreachable(e):
            raise  # the server refused it (and rolled it back), or the caller's transaction decides
        # Closed now, so that whatever runs next on this thread (the retry) reconnects.
        connection.close()
        raise OutcomeUnknown("the database connection died during the purchase's call: whether the order "
                             "was placed is unknown; retry with the same Idempotency-Key to learn it",
                             order_id=None) from e
    if reply.outcome == "sold_out":
        raise SoldOut.short_of(product.sku, quantity, _given(reply.remaining, "remaining"))
    if reply.outcome == "replaced":
        raise SaleReplaced.of(product.sku)
    if reply.outcome == "limit_reached":
        raise LimitReached.of(product.sku, user_id, settings.FLASHSALE_PER_USER_LIMIT)
    expires_at = reply.expires_at and reply.expires_at.replace(tzinfo=UTC)
    order = Order(pk=_given(reply.order_id, "order_id"), user_id=user_id, product=product, quantity=quantity,
                  idempotency_key=key,
                  instance=settings.FLASHSALE_INSTANCE, strategy=strategy, retries=0,
                  status=Order.Status.PENDING if expires_at else Order.Status.PLACED, expires_at=expires_at,
                  request_id=request)
    held_since = time.perf_counter() - reply.held_us / 1e6
    return order, Deducted(remaining=_given(reply.remaining, "remaining"), row_held_since=held_since)


def _given(value: int | None, field: str) -> int:
    # The procedure gives it with this outcome: its absence is the procedure's bug.
    if value is None:
        raise RuntimeError(f"flashsale_purchase's reply has no {field} for its outcome")
    return value
