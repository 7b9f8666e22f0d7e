"""What a hostile client does around a payment: tests cards on one cheap order
(declines counted per order and per buyer, 429 past a budget), pays one order twice
at once (one PaymentIntent per order, confirmed again rather than made again), and
signs an event for a payment the shop never made (refused, nothing moved)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
import stripe
from django.db import connection
from django.test import Client

from buyers.tokens import token_issue
from orders.purchase import order_create
from payments import metrics
from payments.models import Payment, WebhookEvent

from .conftest import WEBHOOK_SECRET, delivered
from .test_payments import buy, pay, status_of

DECLINED = "pm_card_chargeDeclined"


@pytest.fixture
def sale(db):
    from orders.reset import sale_reset

    return sale_reset(sku="sku-1", stock=4, strategy="setnx", payment_window_s=60)


def intents_of(provider, order_id: int) -> list[dict]:
    return [i for i in provider.intents.values() if i["metadata"].get("order_id") == str(order_id)]


@pytest.mark.django_db(transaction=True)
def test_declines_past_the_orders_budget_are_429_before_the_provider_is_asked(provider, sale, settings):
    settings.FLASHSALE_PAY_DECLINES_PER_ORDER = "3/h"
    order_id = buy("ann")
    codes = [pay(order_id, method=DECLINED).status_code for _ in range(3)]
    declines = len(provider.events)
    refused = pay(order_id)  # the right card too: the budget is spent
    assert codes == [402, 402, 402]
    assert refused.status_code == 429 and refused.json()["error"] == "throttled"
    assert 0 < int(refused["Retry-After"]) <= 3600
    assert len(provider.events) == declines  # the provider was not asked
    other = buy("bob")
    assert pay(other).status_code == 202  # another order's budget is its own


@pytest.mark.django_db(transaction=True)
def test_declines_count_per_buyer_across_orders(provider, sale, settings):
    settings.FLASHSALE_BUYER_AUTH = True
    settings.FLASHSALE_PAY_DECLINES_PER_BUYER = "2/h"
    orders = [order_create(sku="sku-1", quantity=1, user_id="ann", idempotency_key=f"ann-{n}").order_id
              for n in range(2)]
    assert orders[0] != orders[1]
    as_ann = {"HTTP_AUTHORIZATION": f"Bearer {token_issue(username='ann').token}"}

    def ann_pays(order_id: int, method: str) -> int:
        return Client().post(f"/api/orders/{order_id}/pay", {"payment_method": method},
                             content_type="application/json", **as_ann).status_code

    codes = [ann_pays(orders[0], DECLINED), ann_pays(orders[1], DECLINED),
             ann_pays(orders[1], "pm_card_visa")]
    assert codes == [402, 402, 429]


@pytest.mark.django_db(transaction=True)
def test_an_order_has_one_intent_confirmed_again_after_a_decline(provider, sale):
    order_id = buy("ann")
    assert pay(order_id, method=DECLINED).status_code == 402
    answer = pay(order_id)
    assert answer.status_code == 202
    delivered(provider)
    assert [i["id"] for i in intents_of(provider, order_id)] == [answer.json()["payment_intent"]]
    assert status_of(order_id) == "paid"


@pytest.mark.django_db(transaction=True)
def test_two_tabs_paying_at_once_make_one_intent_and_one_charge(provider, sale):
    order_id = buy("ann")
    provider.hold()

    def pays(key: str) -> int:
        try:
            return pay(order_id, key=key).status_code
        finally:
            connection.close()  # this thread's

    with ThreadPoolExecutor(2) as tabs:
        codes = sorted(tabs.map(pays, ["tab-1", "tab-2"]))
    provider.release()
    delivered(provider)
    assert codes == [202, 409]
    assert len(intents_of(provider, order_id)) == 1 and not provider.refunds
    assert status_of(order_id) == "paid"
    assert pay(order_id, key="tab-1").status_code == 409  # paid: its key replays nothing now


def _signed(event: dict):
    body = json.dumps(event)
    signature = stripe.WebhookSignature.generate_signature_header(body, WEBHOOK_SECRET)
    return Client().post("/api/payments/webhook", data=body, content_type="application/json",
                         HTTP_STRIPE_SIGNATURE=signature)


@pytest.mark.django_db(transaction=True)
def test_a_signed_event_for_a_payment_the_shop_did_not_make_moves_nothing(provider, sale):
    order_id, other = buy("ann"), buy("bob")
    provider.hold()
    assert pay(other).status_code == 202
    bobs = Payment.objects.get(order_id=other)
    refused = metrics.REFUSED_EVENTS.labels("payment_intent.succeeded")
    before = refused._value.get()

    def succeeded(n: int, intent_id: str, order: int, amount: int = 999, currency: str = "usd") -> dict:
        return {"id": f"evt_forged_{n}", "object": "event", "type": "payment_intent.succeeded",
                "data": {"object": {"id": intent_id, "object": "payment_intent", "amount": amount,
                                    "currency": currency, "metadata": {"order_id": str(order)}}}}

    answers = [_signed(succeeded(1, "pi_never_made", order_id)),
               _signed(succeeded(2, bobs.pk, order_id)),  # bob's payment, naming ann's order
               _signed(succeeded(3, bobs.pk, other, amount=1)),
               _signed(succeeded(4, bobs.pk, other, currency="eur"))]
    assert [(a.status_code, a.json()["error"]) for a in answers] == [(400, "invalid")] * 4
    assert refused._value.get() - before == 4
    assert not WebhookEvent.objects.exists()
    assert (status_of(order_id), status_of(other)) == ("pending", "pending")
    provider.release()
    delivered(provider)
    assert status_of(other) == "paid"  # the provider's own event, for the payment the shop made
