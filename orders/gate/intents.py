"""What the gate accepted, as the persisters and a redrive write it to MySQL: an
order's stream entry (``Intent``) and a batch's write, in one transaction, its
refused intents told apart (``intents_write``)."""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass, field
from typing import NamedTuple

from django.db import DataError, IntegrityError, transaction

from common.bulk import rows_insert
from common.errors import SoldOut
from inventory.services import Decided, stock_record_decided

from ..models import GateSale, Order
from .store import ID_BLOCK_SHIFT

logger = logging.getLogger(__name__)


class Intent(NamedTuple):
    """One entry of a gate stream: an order the gate accepted."""

    entry_id: str
    order_id: int
    key: str
    user_id: str
    quantity: int
    before: int
    after: int
    instance: str
    request: str  # the name of the request that placed it ("": none, or an entry older than the field)

    @classmethod
    def parse(cls, entry_id: str, fields: dict[str, str]) -> Intent:
        """:raises ValueError: the entry is not one the gate's script writes."""
        try:
            return cls(entry_id=entry_id, order_id=int(fields["order"]), key=fields["key"],
                       user_id=fields["user"], quantity=int(fields["quantity"]), before=int(fields["before"]),
                       after=int(fields["after"]), instance=fields["instance"],
                       request=fields.get("request", ""))
        except (KeyError, ValueError) as e:
            raise ValueError(f"malformed gate entry {entry_id}: {fields!r}") from e

    @property
    def accepted_at(self) -> datetime.datetime:
        """When the gate accepted it: a stream entry's id is Redis's clock, in ms."""
        ms = int(self.entry_id.partition("-")[0])
        return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


@dataclass
class Written:
    """What one batch came to."""

    written: list[Intent] = field(default_factory=list)
    already: list[Intent] = field(default_factory=list)  # redelivered: written before
    closed: list[Intent] = field(default_factory=list)  # of a sale since reset: nothing to write
    dead: list[tuple[Intent, str]] = field(default_factory=list)  # could not be written, and why


# What the database answers to a write it will never accept: the intent is dead.
# Anything else (unreachable, a lock wait, a deadlock) passes; the batch is tried again.
REFUSED = (IntegrityError, DataError, SoldOut)


def intents_write(intents: list[Intent]) -> Written:
    """Write a batch in one transaction; if the database refuses it, write its
    intents one at a time, each in its own, and return the ones it refuses as dead.

    :raises DatabaseError: the database cannot be reached, or gave up on a lock:
        nothing is decided, the batch is tried again.
    """
    try:
        with transaction.atomic():
            return _write(intents)
    except REFUSED as e:
        logger.warning("a batch of %d was refused (%s); writing its intents one at a time", len(intents), e)
    outcome = Written()
    for intent in intents:
        try:
            with transaction.atomic():
                one = _write([intent])
        except REFUSED as e:
            outcome.dead.append((intent, f"{type(e).__name__}: {e}"))
            continue
        outcome.written += one.written
        outcome.already += one.already
        outcome.closed += one.closed
    return outcome


def _write(intents: list[Intent]) -> Written:
    outcome = Written()
    # The sales' rows, locked until the commit: a reset of the product deletes its
    # sale first, so it waits for this batch and then deletes what it wrote; a
    # reconciliation after a failover supersedes it. An intent whose sale is gone or
    # superseded belongs to a sale since reset or rebuilt: nothing to write.
    blocks = {intent.order_id >> ID_BLOCK_SHIFT for intent in intents}
    sales = {sale.pk: sale for sale in GateSale.objects.select_for_update().select_related("product")
             .filter(pk__in=blocks, superseded_at__isnull=True)}
    live: list[Intent] = []
    for intent in intents:
        (live if intent.order_id >> ID_BLOCK_SHIFT in sales else outcome.closed).append(intent)
    existing = set(Order.objects.filter(pk__in=[i.order_id for i in live]).values_list("pk", flat=True))
    for intent in live:
        (outcome.already if intent.order_id in existing else outcome.written).append(intent)
    if not outcome.written:
        return outcome
    by_sale: dict[int, list[Intent]] = {}
    for intent in outcome.written:
        by_sale.setdefault(intent.order_id >> ID_BLOCK_SHIFT, []).append(intent)
    for block, batch in by_sale.items():
        product = sales[block].product
        # A payment window runs from when the gate accepted the order, as the buyer saw it.
        rows_insert(Order, ("id", "user_id", "product", "quantity", "idempotency_key", "instance", "strategy",
                            "accepted_at", "request_id", "status", "expires_at"),
                    [(i.order_id, i.user_id, product.pk, i.quantity, i.key, i.instance, "gate", i.accepted_at,
                      i.request, *Order.terms(product, i.accepted_at).values())
                     for i in batch])
        stock_record_decided(product=product, decided=[
            Decided(quantity=i.quantity, operation_flag=i.key, order_reference=str(i.order_id),
                    quantity_before=i.before, quantity_after=i.after)
            for i in batch
        ])
    return outcome
