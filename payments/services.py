"""An order's payment: started by its buyer at the provider, settled by the
provider's webhook.

The order moves only on the webhook, the provider's word, as Stripe advises: the
buyer's request starts the payment and answers 202. Each move is one conditional
UPDATE in the transaction that records the event's id, so a delivery repeated, late
or out of order changes nothing twice:

- ``payment_intent.succeeded`` for a **pending** order: ``pending`` → ``paid``
  (racing the expirer's ``pending`` → ``expired``: one of them matches).
- for an **expired** order (a late payment): its units went back on sale and may be
  sold again. Under the sale's stock locks, as a purchase would, it takes them again
  (a ``sale`` row in the ledger flagged ``resale <order>``, the buyer's quota counted
  again): ``expired`` → ``paid``. If the stock (or the buyer's limit) has no room,
  the payment is refunded through the provider and the order is ``refunded``.
- for an order that another payment paid, or that is gone: refunded.
- ``payment_intent.payment_failed``: recorded; the order still waits until it expires.
- ``charge.refunded``: recorded; for the payment that paid the order, in full (the
  shop's operator refunded it at the provider): the order is ``refunded``, its units
  back on sale once (``payments.expiry.order_refunded``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, transaction

from common.errors import (
    Busy,
    InvalidInput,
    NotFound,
    NotPayable,
)
from common.metrics import count
from common.strategies import strategy_of
from orders.giveback import OrderChanged, order_moved
from orders.models import Order
from orders.selectors import order_status_get
from orders.sellers import seller_of

from . import metrics
from .expiry import order_refunded
from .models import Payment, WebhookEvent
from .provider import IntentSettled, event_verified, intent_confirm, intent_create, refund_create

if TYPE_CHECKING:
    import stripe

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PaymentStarted:
    order_id: int
    payment_intent: str
    status: str  # the provider's word on the intent; the order moves on its webhook
    amount: int
    currency: str


def payment_start(*, order_id: int, buyer: str | None, payment_method: str,
                  idempotency_key: str | None = None) -> PaymentStarted:
    """Start paying ``order_id`` at the provider with ``payment_method``. With a key,
    a repeated request is the same payment (the provider's idempotency).

    :raises NotFound: no such order, or (``buyer`` given) not that buyer's.
    :raises Busy: a gate order not written to the database yet (a moment).
    :raises NotPayable: the order waits for no payment (paid, expired, no payment step).
    :raises PaymentDeclined: the provider declined it; the order still waits.
    :raises Unavailable: the provider cannot be reached.
    """
    order = Order.objects.filter(pk=order_id).first()
    if order is None:
        # Not in the database: one the gate accepted, on its way there? (NotFound: no.)
        found = order_status_get(order_id=order_id, buyer=buyer)
        if found.status not in ("accepted", "confirmed"):  # dead-lettered: no persister will write it
            raise NotPayable(f"order {order_id} is {found.status}: it waits for no payment",
                             extra={"order_id": order_id, "status": found.status})
        # Accepted by the gate, not written yet (or written just now): a persister
        # writes it in milliseconds.
        raise Busy(f"order {order_id} is on its way to the database: pay in a moment",
                   extra={"order_id": order_id})
    if buyer is not None and order.user_id != buyer:
        raise NotFound(f"no order {order_id}", extra={"order_id": order_id})
    if order.status != Order.Status.PENDING:
        raise NotPayable(f"order {order_id} is {order.status}: it waits for no payment",
                         extra={"order_id": order_id, "status": order.status})
    payment = _order_payment(order_id=order_id, amount=order.quantity * settings.FLASHSALE_UNIT_PRICE,
                             currency=settings.FLASHSALE_CURRENCY)
    # The provider's key names the order too: one buyer's key for two orders is two payments.
    key = f"pay {order_id} {idempotency_key or uuid.uuid4().hex}"
    try:
        intent = intent_confirm(intent_id=payment.intent_id, payment_method=payment_method,
                                idempotency_key=key)
    except IntentSettled:
        raise NotPayable(f"order {order_id} is paid at the provider: it is paid here when the provider's "
                         "word comes", extra={"order_id": order_id, "status": order.status}) from None
    return PaymentStarted(order_id=order_id, payment_intent=intent.id, status=intent.status,
                          amount=payment.amount, currency=payment.currency)


def _order_payment(*, order_id: int, amount: int, currency: str) -> Payment:
    """The order's one payment at the provider (its PaymentIntent), confirmed again
    at each try rather than made again: the one recorded, or one made now and
    recorded before it is confirmed, so that the webhook of any payment of it finds
    it (``webhook_receive`` refuses an intent this shop did not make for the order).
    Two first tries at once make one intent: the provider's key names the order."""
    payment = Payment.objects.filter(order_id=order_id).order_by("created_at", "pk").first()
    if payment is not None:
        return payment
    intent = intent_create(order_id=order_id, amount=amount, currency=currency,
                           idempotency_key=f"intent {order_id}")
    return _payment_record(intent_id=intent.id, order_id=order_id, amount=intent.amount,
                           currency=intent.currency, status=Payment.Status.STARTED)


def webhook_receive(*, payload: bytes, signature: str | None) -> str:
    """Handle one delivery of a provider event; returns what it did (``paid``,
    ``paid_late``, ``refunded``, ``failed``, ``duplicate``, ...).

    :raises InvalidInput: not signed by the provider, not an event, or not one this
        endpoint handles (nothing recorded: the provider delivers it again, and the
        log says why).
    :raises Unavailable: a refund the provider did not take; nothing recorded, so its
        next delivery tries again.
    """
    event = event_verified(payload, signature)
    handler = _HANDLERS.get(event.type)
    if handler is None:
        logger.warning("webhook: an event of a type not handled here: %s %s", event.type, event.id)
        raise InvalidInput(f"events of type {event.type!r} are not handled here",
                           extra={"event": event.id, "type": event.type})
    obj = event.data.object
    try:
        order_id = int(obj.metadata["order_id"])
    except (KeyError, TypeError, ValueError):
        logger.warning("webhook: %s %s names no order", event.type, event.id)
        raise InvalidInput("the event's object names no order (metadata.order_id)",
                           extra={"event": event.id}) from None
    if WebhookEvent.objects.filter(pk=event.id).exists():
        return "duplicate"
    _payment_checked(event, obj, order_id)
    return handler(event, obj, order_id)


def _payment_checked(event: stripe.Event, obj: Any, order_id: int) -> None:
    """The event's payment is one this shop made for that order, for the amount and
    in the currency it asked (a refund's charge: of such a payment).

    :raises InvalidInput: it is not (logged; nothing moves).
    """
    is_intent = getattr(obj, "object", None) == "payment_intent"
    intent_id = getattr(obj, "id" if is_intent else "payment_intent", None)
    asked = (Payment.objects.filter(pk=str(intent_id or ""), order_id=order_id)
             .values_list("amount", "currency").first())
    found = (getattr(obj, "amount", None), getattr(obj, "currency", None)) if is_intent else None
    if asked is not None and (not is_intent or asked == found):
        return
    logger.warning("webhook: %s %s refused: payment %s of order %s is not one this shop made for it "
                   "(asked %s, the event says %s)", event.type, event.id, intent_id, order_id, asked, found)
    count(metrics.REFUSED_EVENTS, event.type)
    raise InvalidInput(f"the event's payment is not one this shop made for order {order_id}, for that amount",
                       extra={"event": event.id})


def _succeeded(event: stripe.Event, intent: stripe.PaymentIntent, order_id: int) -> str:
    for _ in range(3):
        order = Order.objects.select_related("product").filter(pk=order_id).first()
        try:
            if order is None:
                return _refunded(event, intent, order_id, why="its order is gone (the sale was reset)")
            if order.status == Order.Status.PENDING:
                return _paid_in_time(event, intent, order)
            if order.status == Order.Status.EXPIRED:
                return _paid_late(event, intent, order)
            if order.status == Order.Status.PAID and Payment.objects.filter(
                    pk=intent.id, status=Payment.Status.SUCCEEDED).exists():
                return _recorded(event, intent, order_id, Payment.Status.SUCCEEDED, "paid")
            return _refunded(event, intent, order_id, why=f"the order is {order.status}")
        except OrderChanged:
            continue
    raise Busy(f"order {order_id} kept changing while its payment was recorded; the provider delivers again")


def _paid_in_time(event: stripe.Event, intent: stripe.PaymentIntent, order: Order) -> str:
    with transaction.atomic():
        if not _event_claimed(event):
            return "duplicate"
        if not order_moved(order.pk, Order.Status.PENDING, Order.Status.PAID):
            raise OrderChanged
        _intent_record(intent, order.pk, Payment.Status.SUCCEEDED)
    count(metrics.PAID, order.strategy)
    return "paid"


def _paid_late(event: stripe.Event, intent: stripe.PaymentIntent, order: Order) -> str:
    """A payment for an expired order: its units taken again by the sale's seller, as
    a purchase of the sale would take them, in the transaction that claims the event
    and records the payment; or, the sale having no room, the payment refunded."""
    outcome = seller_of(strategy_of(order.product.strategy)).take_again(
        order, claim=lambda: _event_claimed(event),
        then=lambda: _intent_record(intent, order.pk, Payment.Status.SUCCEEDED))
    if outcome is None:
        return _refunded(event, intent, order.pk, why="the sale has no room for its units", late=True)
    if outcome == "paid_late":
        count(metrics.PAID, order.strategy)
        count(metrics.LATE, "paid")
    return outcome


def _refunded(event: stripe.Event, intent: stripe.PaymentIntent, order_id: int, *, why: str,
              late: bool = False) -> str:
    """Give the payment back, then record it: a refund the provider did not take
    leaves nothing recorded, so the event's next delivery tries again (the refund's
    key makes the provider's side once)."""
    refund_create(intent_id=intent.id, idempotency_key=f"refund {intent.id}")
    logger.info("payment %s of order %s refunded: %s", intent.id, order_id, why)
    with transaction.atomic():
        if not _event_claimed(event):
            return "duplicate"
        order_moved(order_id, Order.Status.EXPIRED, Order.Status.REFUNDED)
        _intent_record(intent, order_id, Payment.Status.REFUNDED)
    count(metrics.REFUNDS, "late" if late else "other")
    if late:
        count(metrics.LATE, "refunded")
    return "refunded"


def _failed(event: stripe.Event, intent: stripe.PaymentIntent, order_id: int) -> str:
    return _recorded(event, intent, order_id, Payment.Status.FAILED, "failed")


def _charge_refunded(event: stripe.Event, charge: stripe.Charge, order_id: int) -> str:
    """A refund at the provider. Of the payment that paid the order, in full (the
    shop's operator refunded it): the order is ``refunded`` and its units go back on
    sale once. Of any other (one this endpoint refunded, or a partial refund):
    recorded."""
    def recorded() -> bool:
        if not _event_claimed(event):
            return False
        Payment.objects.filter(pk=charge.payment_intent).exclude(status=Payment.Status.REFUNDED).update(
            status=Payment.Status.REFUNDED)
        return True

    order = Order.objects.select_related("product").filter(pk=order_id).first()
    paid_by_it = Payment.objects.filter(pk=charge.payment_intent, order_id=order_id,
                                        status=Payment.Status.SUCCEEDED).exists()
    in_full = getattr(charge, "refunded", False)
    if order is not None and order.status == Order.Status.PAID and paid_by_it and in_full:
        outcome = order_refunded(order=order, claim=recorded)
        if outcome != "not_paid":
            return "order_refunded" if outcome == "refunded" else outcome
        return "refund_recorded"
    with transaction.atomic():
        if not recorded():
            return "duplicate"
    return "refund_recorded"


def _recorded(event: stripe.Event, intent: stripe.PaymentIntent, order_id: int, status: str,
              outcome: str) -> str:
    with transaction.atomic():
        if not _event_claimed(event):
            return "duplicate"
        _intent_record(intent, order_id, status)
    return outcome


# Each given the event's object: a PaymentIntent or a Charge, as the event's type says.
_HANDLERS: dict[str, Callable[[stripe.Event, Any, int], str]] = {
    "payment_intent.succeeded": _succeeded,
    "payment_intent.payment_failed": _failed,
    "charge.refunded": _charge_refunded,
}


def _event_claimed(event: stripe.Event) -> bool:
    """Record the event in the caller's transaction; False if it was recorded before
    (a second delivery): the caller changes nothing."""
    try:
        with transaction.atomic():  # a savepoint: the caller's transaction stays usable
            WebhookEvent.objects.create(event_id=event.id, kind=event.type)
    except IntegrityError:
        return False
    return True


# A payment's statuses only go forward: a failure reported after the success (events
# arrive out of order) leaves it succeeded.
_RANK = {Payment.Status.STARTED: 0, Payment.Status.FAILED: 1, Payment.Status.SUCCEEDED: 2,
         Payment.Status.REFUNDED: 3}


def _intent_record(intent: stripe.PaymentIntent, order_id: int, status: str) -> None:
    _payment_record(intent_id=intent.id, order_id=order_id, amount=intent.amount, currency=intent.currency,
                    status=status)


def _payment_record(*, intent_id: str, order_id: int, amount: int, currency: str, status: str) -> Payment:
    """The intent's payment, recorded (its status moved forward if it was); the
    object's own status as read before the move."""
    payment, created = Payment.objects.get_or_create(
        intent_id=intent_id, defaults={"order_id": order_id, "amount": amount, "currency": currency,
                                       "status": status})
    if not created:
        behind = [s for s, rank in _RANK.items() if rank < _RANK[Payment.Status(status)]]
        Payment.objects.filter(pk=intent_id, status__in=behind).update(status=status)
    return payment


def order_pay(*, order_id: int) -> str:
    """``pending`` → ``paid`` by one conditional UPDATE, outside the webhook (an
    operator's record of a payment made elsewhere; the tests' race with the expirer).

    :returns: the order's status after.
    :raises NotFound: no such order.
    """
    with transaction.atomic():
        pending = Order.objects.filter(pk=order_id, status=Order.Status.PENDING)
        moved = pending.update(status=Order.Status.PAID)
        found = Order.objects.filter(pk=order_id).values_list("status", "strategy").first()
    if found is None:
        raise NotFound(f"no order {order_id}", extra={"order_id": order_id})
    if moved:
        count(metrics.PAID, found[1])
    return found[0]
