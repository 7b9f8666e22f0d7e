"""The purchase: one request's path, top to bottom.

``order_create`` validates, waits while the deployment switches strategy
(``orders.barrier``), then makes the purchase's one decision: which strategy
the product's sale runs under (``orders.resolve``: the sale's state in Redis,
else the product's row). The purchase, made once (``orders.results.Purchase``),
goes to that strategy's seller (``orders.sellers``):

- **the transaction** (every strategy but the gate, ``orders.transaction``): the
  order and the stock's deduction commit in one database transaction, under the
  strategy's lock, or as one stored-procedure call.
- **the gate**: one script in Redis decides (``orders.gate.sell``); a persister
  writes the order to the database after the answer.

Every answer is true of the database: a refused keyed request first makes sure its
key has no order (unless the sale's state vouches for the flags); a failure at or
after the COMMIT is ``OutcomeUnknown``, never "nothing written"; a database that
cannot be reached is ``Unavailable``; nothing commits past the purchase's deadline.
"""

from __future__ import annotations

import time
import uuid

from django.conf import settings
from django.db import DatabaseError, transaction

from common.errors import Busy, InvalidInput, Unavailable, database_failure
from waitingroom.services import admission_checked

from .barrier import barrier_pass
from .idempotency import request_fingerprint
from .resolve import strategy_resolve
from .results import OrderResult, Purchase
from .sellers import seller_of


def order_create(
    *, sku: str, quantity: int, user_id: str, idempotency_key: str | None = None,
    received_at: float | None = None, admission: str | None = None,
) -> OrderResult:
    """Buy ``quantity`` units of ``sku`` for ``user_id``, at most once per key; with
    ``admission``, the buyer's token from the sale's waiting room, spent on it.

    ``received_at`` (epoch seconds, default now) is when the request reached the
    instance (its arrival stamp): the purchase commits nothing after
    ``FLASHSALE_PURCHASE_DEADLINE_S`` from it.

    :raises InvalidInput: quantity out of range.
    :raises NotFound: unknown sku.
    :raises AdmissionRefused: the sale has a waiting room, and ``admission`` does not
        buy (none, forged, expired, another's, spent on another purchase).
    :raises SoldOut: not enough stock left.
    :raises IdempotencyConflict: the key was used for a different request.
    :raises Busy: the stock lock, or the key's first request, did not free up in time.
    :raises Unavailable: a server the purchase needs cannot be reached; nothing was written.
    :raises OutcomeUnknown: the connection died during the commit; a retry with the
        key learns whether the order was placed.
    """
    if not 1 <= quantity <= settings.FLASHSALE_MAX_PER_ORDER:
        raise InvalidInput(
            f"quantity must be between 1 and {settings.FLASHSALE_MAX_PER_ORDER}",
            extra={"fields": {"quantity": [f"must be 1..{settings.FLASHSALE_MAX_PER_ORDER}"]}},
        )
    waited = 0.0 if received_at is None else max(time.time() - received_at, 0.0)
    deadline = time.monotonic() - waited + settings.FLASHSALE_PURCHASE_DEADLINE_S
    if time.monotonic() > deadline:
        # It waited in a queue (a frozen instance's) past the deadline: its client has
        # been answered 504 and moved on; nothing is claimed, nothing written.
        raise Busy(f"{sku}: the purchase arrived past its deadline; nothing was written")
    barrier_pass(sku=sku, deadline=deadline)
    # Checked at the door; spent by the purchase's key (one made for it without one),
    # so that the same purchase retried spends it again; the sale says whether it
    # needs one.
    checked = admission_checked(sku=sku, buyer=user_id, token=admission)
    try:
        strategy, segments = strategy_resolve(sku)
        purchase = Purchase(sku=sku, quantity=quantity, buyer=user_id,
                            key=idempotency_key or f"auto-{uuid.uuid4().hex}", keyed=bool(idempotency_key),
                            fingerprint=request_fingerprint(sku=sku, quantity=quantity, user_id=user_id),
                            deadline=deadline, admission=checked, strategy=strategy)
        return seller_of(strategy).sell(purchase, segments)
    except DatabaseError as e:
        answer = database_failure(e, then="nothing was written")
        if answer is None:
            raise
        if isinstance(answer, Unavailable):
            # Closed now, not at the end of the request: whatever runs next on this
            # thread opens a new connection, once the server is back.
            transaction.get_connection().close()
        raise answer from e
