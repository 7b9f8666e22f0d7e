"""The payment provider, through Stripe's own client library: Stripe in a deployment,
the stack's stand-in (``payprovider``) here. ``FLASHSALE_PAYMENTS_API_BASE`` says
which; nothing else changes."""

from __future__ import annotations

import functools
import logging

import stripe
from django.conf import settings
from django.core.signals import setting_changed

from common.errors import InvalidInput, PaymentDeclined, Unavailable

logger = logging.getLogger(__name__)

# The test mode's card that pays (Stripe's, and the stand-in's).
SUCCEEDS = "pm_card_visa"


@functools.cache
def _client() -> stripe.StripeClient:
    key = settings.FLASHSALE_PAYMENTS_API_KEY
    if not key:
        raise Unavailable("payments are not configured: FLASHSALE_PAYMENTS_API_KEY is empty",
                          backend="payments")
    # The library retries what is safe to retry, with the same idempotency key.
    return stripe.StripeClient(key, base_addresses={"api": settings.FLASHSALE_PAYMENTS_API_BASE},
                               max_network_retries=2)


def _reset_client(*, setting: str, **kwargs: object) -> None:
    if setting.startswith("FLASHSALE_PAYMENTS_"):
        _client.cache_clear()


setting_changed.connect(_reset_client)


def intent_create(*, order_id: int, amount: int, currency: str, idempotency_key: str) -> stripe.PaymentIntent:
    """A PaymentIntent for the order, not confirmed yet. Asked again with the same key
    (and the same amount), the provider answers the first one again.

    :raises Unavailable: the provider cannot be reached, or failed.
    """
    # The typed params of this stripe release no longer list payment_method_types; the
    # request is left as the stand-in was built against (card only).
    params: stripe.params.PaymentIntentCreateParams = {  # type: ignore[typeddict-unknown-key]
        "amount": amount, "currency": currency, "payment_method_types": ["card"],
        "metadata": {"order_id": str(order_id)}}
    try:
        return _client().v1.payment_intents.create(params=params,
                                                   options={"idempotency_key": idempotency_key})
    except stripe.StripeError as e:
        raise Unavailable(f"the payment provider failed: {e.user_message or e}", backend="payments") from e


def intent_confirm(*, intent_id: str, payment_method: str, idempotency_key: str) -> stripe.PaymentIntent:
    """Pay ``intent_id`` with ``payment_method``: the first time, or again after a
    decline. Asked again with the same key, the provider answers as the first time.

    :raises PaymentDeclined: the card was declined (the provider sends the failure's
        event too), or the provider refused the payment method (it does not know it).
    :raises IntentSettled: the intent succeeded before (another request paid it).
    :raises Unavailable: the provider cannot be reached, or failed.
    """
    try:
        return _client().v1.payment_intents.confirm(intent_id, params={"payment_method": payment_method},
                                                    options={"idempotency_key": idempotency_key})
    except stripe.CardError as e:
        raise PaymentDeclined(e.user_message or "the card was declined",
                              extra={"decline_code": (e.error and e.error.decline_code) or e.code}) from e
    except stripe.InvalidRequestError as e:
        if e.code == "payment_intent_unexpected_state":
            raise IntentSettled(intent_id) from e
        # A payment method the provider does not know (or will not take): well formed,
        # so the API's schema allows it, but no payment can be made with it.
        raise PaymentDeclined(e.user_message or "the payment provider refused the payment method",
                              extra={"decline_code": e.code or "invalid_payment_method"}) from e
    except stripe.StripeError as e:
        raise Unavailable(f"the payment provider failed: {e.user_message or e}", backend="payments") from e


class IntentSettled(Exception):
    """The intent cannot be confirmed again: it succeeded (or is being refunded)."""


def refund_create(*, intent_id: str, idempotency_key: str) -> None:
    """Give back what ``intent_id`` took. Idempotent by key; a refund the provider
    already made counts as made.

    :raises Unavailable: the provider cannot be reached, or failed (the caller tries again).
    """
    try:
        _client().v1.refunds.create(params={"payment_intent": intent_id},
                                    options={"idempotency_key": idempotency_key})
    except stripe.InvalidRequestError as e:
        if e.code == "charge_already_refunded":
            return
        raise Unavailable(f"the payment provider refused the refund: {e.user_message or e}",
                          backend="payments") from e
    except stripe.StripeError as e:
        raise Unavailable(f"the payment provider failed: {e.user_message or e}", backend="payments") from e


def event_verified(payload: bytes, signature: str | None) -> stripe.Event:
    """The webhook's event, once its ``Stripe-Signature`` proves the provider sent it
    (the library's own check: HMAC-SHA256 with the endpoint's secret, a timestamp
    within five minutes).

    :raises InvalidInput: unsigned, badly signed, stale, or not an event.
    """
    secret = settings.FLASHSALE_PAYMENTS_WEBHOOK_SECRET
    if not secret:
        raise Unavailable("payments are not configured: FLASHSALE_PAYMENTS_WEBHOOK_SECRET is empty",
                          backend="payments")
    try:
        event: stripe.Event = stripe.Webhook.construct_event(payload, signature, secret)  # unannotated there
        return event
    except stripe.SignatureVerificationError as e:
        raise InvalidInput(f"the webhook's signature does not verify: {e.user_message or e}") from e
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidInput("the webhook's body is not an event") from e
