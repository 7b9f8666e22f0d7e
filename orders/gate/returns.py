"""Stock coming back to a gate sale (a sale with a payment window, ``payments``): an
expired or refunded order's units given back to Redis's stock (``gate_give_back``),
and a late payment's taken out again (``gate_take_again``), each once per order, by
a marker in the sale's ``returns`` hash.

The database moves first (the order expired, its units back in the stock row and a
``return`` row in the ledger; or the order paid again with a ``resale`` row), so a
Redis that fails in between leaves the database right and Redis short: the expirer
gives what it owes again (``gate_return``'s markers make a second call do nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import NamedTuple

import redis
from django.conf import settings
from django.db import transaction
from redis.typing import EncodableT

from common.errors import Busy, Unavailable
from inventory.models import Product, Stock
from inventory.services import Decided, stock_record_decided

from ..giveback import Claimed, OrderChanged, order_moved, read_committed, resale_flag, units_return
from ..models import GateSale, Order
from .store import RETAKE, RETURN, gate_keys, gate_redis, gate_script

logger = logging.getLogger(__name__)


class Owed(NamedTuple):
    """An order whose units go back: its id, its quantity, its buyer."""

    order_id: int
    quantity: int
    user_id: str


def gate_return(*, sku: str, orders: Iterable[Owed], refunded: bool = False) -> dict[int, str]:
    """Give each order's units back to ``sku``'s sale in Redis, expired orders' (or,
    ``refunded``, paid orders' refunded at the provider): order id -> what the script
    did (``returned``, ``already``, ``other``: not the sale Redis holds, whose stock
    the database loaded with them back; ``cold``: no sale held; ``failover``: the
    sale held was opened on another server, and a rebuild is to replace it: still owed).

    :raises Unavailable: Redis cannot be reached (some may have been given back: the
        markers make the next call for them do nothing).
    """
    k = gate_keys(sku)
    script = gate_script(RETURN)
    owed = list(orders)
    calls: list[tuple[list[str], list[EncodableT]]] = [([k.sale, k.returns, k.bought],
              [order.order_id, order.quantity, order.user_id, "refunded" if refunded else "expired"])
             for order in owed]
    try:
        if settings.FLASHSALE_GATE_REDIS_CLUSTER:
            # A Cluster's pipeline refuses scripts: one call each, on the sale's node.
            replies = [script(keys=keys, args=args) for keys, args in calls]
        else:
            with gate_redis().pipeline(transaction=False) as pipe:
                for keys, args in calls:
                    script(keys=keys, args=args, client=pipe)
                replies = pipe.execute()
    except redis.RedisError as e:
        raise Unavailable("the gate's Redis cannot be reached to give units back", backend="redis") from e
    return {order.order_id: reply[0] for order, reply in zip(owed, replies, strict=True)}


class Retaken(NamedTuple):
    """What a late payment's take in Redis did: ``outcome`` (``retaken``, ``kept``,
    ``already``, ``sold_out``, ``limit``, ``cold``, ``failover``), the stock it left
    (``retaken`` only), and the sale that decided (its block; None: ``cold``,
    ``failover``)."""

    outcome: str
    left: int | None
    sale: int | None


def gate_retake(*, sku: str, order: Owed) -> Retaken:
    """Take a late-paid order's units out of ``sku``'s sale in Redis again: ``retaken``
    (and the stock it left), ``kept`` (never given back: the order keeps them),
    ``already``, ``sold_out``, ``limit`` (the buyer's per-user limit) or ``cold``.

    :raises Unavailable: Redis cannot be reached.
    """
    k = gate_keys(sku)
    try:
        reply = gate_script(RETAKE)(keys=[k.sale, k.returns, k.bought],
                                 args=[order.order_id, order.quantity, order.user_id,
                                       settings.FLASHSALE_PER_USER_LIMIT])
    except redis.RedisError as e:
        raise Unavailable("the gate's Redis cannot be reached to take units again", backend="redis") from e
    if reply[0] in ("cold", "failover"):
        return Retaken(reply[0], None, None)
    return Retaken(reply[0], int(reply[1]) if reply[0] == "retaken" else None, int(reply[2]))


def gate_give_back(product: Product, *, take: Callable[[], list[Claimed]], refunded: bool,
                   hand: Callable[[int], None]) -> tuple[int, int]:
    """The database first (the orders ``take`` claims moved, their units back in the
    stock row, a return row each), then Redis's stock (``gate_return``), whose
    markers make a repeated return do nothing. No lock: the persisters' writes to the
    stock row are conditional decrements, and Redis decides the sale. Redis
    unreachable after the commit: the units are owed to it; each expiry pass gives an
    expiry's again (``gate_owed_pay``), and the sweep gives every one's. ``hand``
    hears how many orders are claimed before their units are back in Redis. Returns
    (orders, units)."""
    read_committed()
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
    return len(claimed), units


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


def gate_owed_pay() -> None:
    """Give the gate's Redis what this process's expiries owe it."""
    for owed in sorted(_owed):
        _owe(owed, [])


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


def gate_take_again(order: Order, *, claim: Callable[[], bool] = lambda: True,
                    then: Callable[[], None] = lambda: None) -> str | None:
    """A late payment under the gate, in one transaction: ``claim`` first (False: the
    payment was recorded before; nothing is done), the order moved ``expired`` →
    ``paid``, and the gate sale's row locked (as a rebuild and every persister's batch
    lock it); then Redis takes the units again (it decides the sale; its marker makes
    a repeated call do nothing); then the stock row and a ``resale`` row in the
    ledger; ``then`` last. So a delivery that finds the event handled or the order
    moved touches nothing in Redis, and a rebuild reads the order either expired with
    its units in the stock it loads (before this commits) or paid without them
    (after).

    :returns: ``paid_late``; ``duplicate`` (``claim`` said so); None when the sale
        refused the units (sold out, the buyer's limit, no sale: nothing written, the
        payment is to be refunded).
    :raises OrderChanged: the order is no longer expired.
    :raises Busy: a rebuild of the sale is under way. Unavailable: Redis cannot be reached.
    """
    product = order.product
    try:
        with transaction.atomic():
            if not claim():
                return "duplicate"
            if not order_moved(order.pk, Order.Status.EXPIRED, Order.Status.PAID):
                raise OrderChanged
            sales = list(GateSale.objects.select_for_update()
                         .filter(product=product, superseded_at__isnull=True).values_list("pk", flat=True))
            taken = gate_retake(sku=product.sku, order=Owed(order.pk, order.quantity, order.user_id))
            if taken.outcome in ("sold_out", "limit", "cold"):
                raise _Refused(taken.outcome)
            if taken.sale not in sales:
                # Redis still holds a sale a rebuild replaced (it opens the new one
                # after its commit): what it took there goes with it. Again, later.
                raise Busy(f"{product.sku}: the gate's sale is being rebuilt; the provider delivers again")
            left = taken.left
            if left is None:  # the units never came back to Redis: the database's figures
                left = Stock.objects.values_list("quantity", flat=True).get(product=product, segment=0)
                left -= order.quantity
            stock_record_decided(product=product, decided=[
                Decided(quantity=order.quantity, operation_flag=resale_flag(order.pk),
                        order_reference=str(order.pk),
                        quantity_before=left + order.quantity, quantity_after=left)])
            then()
    except _Refused as refused:
        logger.info("order %s: the gate's sale answered %s to its late payment", order.pk, refused)
        return None
    return "paid_late"


class _Refused(Exception):
    """The gate's sale refused a late payment's units (its answer): nothing of the
    payment's transaction stands."""
