"""Paying an order: the buyer's request, the provider's signed webhooks delivered
more than once, late and out of order, and a late payment meeting the stock."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
import stripe
from django.conf import settings
from django.test import Client
from django.utils import timezone

from common.errors import SoldOut
from inventory.models import StockFlow
from orders.giveback import resale_flag
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.selectors import sale_audit
from orders.tests.test_gate import persist
from payments.expiry import orders_expire
from payments.models import Payment, WebhookEvent
from payments.provider import refund_create

from .conftest import WEBHOOK_SECRET, delivered

WINDOW_S = 60


def later():
    return timezone.now() + timedelta(seconds=WINDOW_S + 60)


@pytest.fixture(params=["setnx", "gate"])
def sale(request, db):
    return sale_reset(sku="sku-1", stock=2, strategy=request.param, payment_window_s=WINDOW_S)


def buy(user: str) -> int:
    """A purchase, in the database once it returns (under the gate, once a persister wrote it)."""
    order_id = order_create(sku="sku-1", quantity=1, user_id=user, idempotency_key=f"key-{user}").order_id
    persist()
    return order_id


def pay(order_id: int, method: str = "pm_card_visa", key: str | None = None):
    return Client().post(f"/api/orders/{order_id}/pay", {"payment_method": method},
                         content_type="application/json", headers={"Idempotency-Key": key} if key else None)


def status_of(order_id: int) -> str:
    return Client().get(f"/api/orders/{order_id}").json()["payment_status"]


@pytest.mark.django_db(transaction=True)
def test_a_payment_in_time_pays_the_order_once_its_webhook_comes(provider, sale):
    order_id = buy("ann")
    assert status_of(order_id) == "pending"
    provider.hold()  # its webhook after the retry below, which would find the order paid
    answer = pay(order_id, key="first")
    assert answer.status_code == 202, answer.json()
    assert answer.json()["status"] == "succeeded" and answer.json()["amount"] == 999
    again = pay(order_id, key="first")  # the same key: the same payment
    assert again.json()["payment_intent"] == answer.json()["payment_intent"]
    assert status_of(order_id) == "pending"  # no webhook yet: the provider's word moves it
    provider.release()
    delivered(provider)
    assert status_of(order_id) == "paid"
    assert Payment.objects.get().status == "succeeded"
    assert orders_expire(now=later()).orders == 0  # paid: nothing to expire
    again = pay(order_id)
    assert (again.status_code, again.json()["error"], again.json()["status"]) == (409, "not_payable", "paid")
    assert sale_audit(sku="sku-1").consistent


@pytest.mark.django_db(transaction=True)
def test_a_declined_card_leaves_the_order_waiting_and_the_failure_recorded(provider, sale):
    order_id = buy("ann")
    answer = pay(order_id, method="pm_card_chargeDeclined")
    assert (answer.status_code, answer.json()["error"]) == (402, "payment_declined")
    delivered(provider)
    assert status_of(order_id) == "pending"
    assert [e.kind for e in WebhookEvent.objects.all()] == ["payment_intent.payment_failed"]
    unknown = pay(order_id, method="pm_no_such_method")  # one the provider does not know
    assert (unknown.status_code, unknown.json()["error"]) == (402, "payment_declined")
    assert pay(order_id).status_code == 202  # another card
    delivered(provider)
    assert status_of(order_id) == "paid"


@pytest.mark.django_db(transaction=True)
def test_every_event_delivered_twice_counts_once(provider, sale):
    provider.knobs.duplicate = 1.0
    orders = [buy("ann"), buy("bob")]
    for order_id in orders:
        assert pay(order_id).status_code == 202
    delivered(provider)
    outcomes = sorted(answer["outcome"] for _, answer in provider.relay.answers)
    assert outcomes == ["duplicate", "duplicate", "paid", "paid"]
    assert WebhookEvent.objects.count() == 2
    assert {status_of(order_id) for order_id in orders} == {"paid"}


@pytest.mark.django_db(transaction=True)
def test_a_failure_delivered_after_the_success_changes_nothing(provider, sale):
    order_id = buy("ann")
    provider.webhook_url, url = None, provider.webhook_url  # hold the deliveries
    pay(order_id, method="pm_card_chargeDeclined")
    pay(order_id)
    provider.webhook_url = url
    failed, succeeded = provider.events
    provider.resend(succeeded["id"])
    delivered(provider)
    provider.resend(failed["id"])  # the older event, last
    delivered(provider)
    assert status_of(order_id) == "paid"
    # One intent, declined then paid: its status only goes forward.
    assert failed["data"]["object"]["id"] == succeeded["data"]["object"]["id"]
    assert list(Payment.objects.values_list("intent_id", "status")) == [
        (succeeded["data"]["object"]["id"], "succeeded")]


def _post(body: str, signature: str | None):
    return Client().post("/api/payments/webhook", data=body, content_type="application/json",
                         headers=None if signature is None else {"Stripe-Signature": signature})


@pytest.mark.django_db(transaction=True)
def test_an_unsigned_a_badly_signed_or_an_unknown_event_is_refused_and_writes_nothing(provider, sale):
    order_id = buy("ann")
    event = json.dumps({"id": "evt_forged", "object": "event", "type": "payment_intent.succeeded",
                        "data": {"object": {"id": "pi_forged", "object": "payment_intent", "amount": 999,
                                            "currency": "usd", "metadata": {"order_id": str(order_id)}}}})
    sign = stripe.WebhookSignature.generate_signature_header
    for signature in (None, "t=1,v1=00", sign(event, "whsec_someone_else"), "garbage"):
        answer = _post(event, signature)
        assert (answer.status_code, answer.json()["error"]) == (400, "invalid"), signature
    unknown = json.dumps({"id": "evt_other", "object": "event", "type": "customer.created",
                          "data": {"object": {"id": "cus_1", "object": "customer", "metadata": {}}}})
    answer = _post(unknown, sign(unknown, WEBHOOK_SECRET))
    assert (answer.status_code, answer.json()["type"]) == (400, "customer.created")
    assert _post("not json", sign("not json", WEBHOOK_SECRET)).status_code == 400
    assert not WebhookEvent.objects.exists() and status_of(order_id) == "pending"


def _paid_then_expired(provider, user: str) -> tuple[int, dict]:
    """An order paid in time whose webhook comes after the expirer took its units."""
    order_id = buy(user)
    provider.webhook_url, url = None, provider.webhook_url
    assert pay(order_id).status_code == 202
    provider.webhook_url = url
    assert orders_expire(now=later()).orders == 1
    return order_id, provider.events[-1]


@pytest.mark.django_db(transaction=True)
def test_a_late_payment_takes_its_units_again_while_there_are_some(provider, sale):
    order_id, event = _paid_then_expired(provider, "ann")
    provider.resend(event["id"])
    delivered(provider)
    assert provider.relay.answers[-1][1]["outcome"] == "paid_late"
    assert status_of(order_id) == "paid"
    flows = list(StockFlow.objects.filter(order_reference=str(order_id)).order_by("id")
                 .values_list("kind", "operation_flag"))
    assert flows == [("sale", "key-ann"), ("return", f"return {order_id}"), ("sale", resale_flag(order_id))]
    persist()
    audit = sale_audit(sku="sku-1")
    assert (audit.consistent, audit.remaining, audit.ordered_quantity) == (True, 1, 1)


@pytest.mark.django_db(transaction=True)
def test_a_late_payment_for_units_sold_again_is_refunded(provider, sale):
    order_id, event = _paid_then_expired(provider, "ann")
    time.sleep(settings.FLASHSALE_GATE_SOLD_OUT_MEMORY_S)  # the gate's processes forget the sale sold out
    buy("bob"), buy("cat")  # the returned unit and the last: sold out
    provider.resend(event["id"])
    delivered(provider)
    outcomes = [answer["outcome"] for _, answer in provider.relay.answers]
    assert outcomes == ["refunded", "refund_recorded"]
    assert status_of(order_id) == "refunded"
    assert Payment.objects.get(order_id=order_id).status == "refunded"
    intent = provider.intents[event["data"]["object"]["id"]]
    assert intent["refunded"]
    audit = sale_audit(sku="sku-1")
    assert (audit.consistent, audit.remaining, audit.ordered_quantity, audit.oversold) == (True, 0, 2, 0)


@pytest.mark.django_db(transaction=True)
def test_a_gate_order_the_database_refused_is_not_payable_rather_than_busy(provider):
    # A key used for another product's order first: the gate accepts the purchase (it
    # knows its own sale's keys only), and the persister dead-letters its row.
    sale_reset(sku="sku-0", stock=2, strategy="setnx")
    order_create(sku="sku-0", quantity=1, user_id="ann", idempotency_key="key-ann")
    sale_reset(sku="sku-1", stock=2, strategy="gate", payment_window_s=WINDOW_S)
    order_id = buy("ann")
    assert Client().get(f"/api/orders/{order_id}").json()["status"] == "dead_lettered"
    answer = pay(order_id)
    assert (answer.status_code, answer.json()["error"], answer.json()["status"]) == (
        409, "not_payable", "dead_lettered")


def _refunded_at_the_provider(provider, order_id: int) -> dict:
    """The shop's operator refunds the order's payment at the provider (its API, as
    the dashboard does); returns the ``charge.refunded`` event, once delivered."""
    refund_create(intent_id=Payment.objects.get(order_id=order_id, status="succeeded").pk,
                  idempotency_key=f"operator {order_id}")
    delivered(provider)
    event = provider.events[-1]
    assert event["type"] == "charge.refunded"
    return event


@pytest.mark.django_db(transaction=True)
def test_a_paid_order_refunded_at_the_provider_gives_its_units_back_once(provider, sale):
    order_id = buy("ann")
    buy("bob")  # sold out
    assert pay(order_id).status_code == 202
    delivered(provider)
    assert status_of(order_id) == "paid"
    event = _refunded_at_the_provider(provider, order_id)
    assert provider.relay.answers[-1][1]["outcome"] == "order_refunded"
    assert status_of(order_id) == "refunded"
    provider.resend(event["id"])  # delivered again: nothing more
    delivered(provider)
    assert provider.relay.answers[-1][1]["outcome"] == "duplicate"
    flows = list(StockFlow.objects.filter(order_reference=str(order_id)).order_by("id")
                 .values_list("kind", "operation_flag"))
    assert flows == [("sale", "key-ann"), ("return", f"refund {order_id}")]
    time.sleep(settings.FLASHSALE_GATE_SOLD_OUT_MEMORY_S)  # the gate's processes forget the sale sold out
    buy("cat")  # the unit given back, and no other
    with pytest.raises(SoldOut):
        order_create(sku="sku-1", quantity=1, user_id="dan", idempotency_key="key-dan")
    persist()
    audit = sale_audit(sku="sku-1")
    assert (audit.consistent, audit.remaining, audit.ordered_quantity, audit.oversold) == (True, 0, 2, 0), \
        audit


@pytest.mark.django_db(transaction=True)
def test_a_late_paid_order_refunded_at_the_provider_gives_back_the_units_it_took_again(provider, sale):
    order_id, paid = _paid_then_expired(provider, "ann")
    provider.resend(paid["id"])
    delivered(provider)
    assert status_of(order_id) == "paid"
    _refunded_at_the_provider(provider, order_id)
    assert status_of(order_id) == "refunded"
    flows = list(StockFlow.objects.filter(order_reference=str(order_id)).order_by("id")
                 .values_list("kind", "operation_flag"))
    assert flows == [("sale", "key-ann"), ("return", f"return {order_id}"), ("sale", resale_flag(order_id)),
                     ("return", f"refund {order_id}")]
    persist()
    audit = sale_audit(sku="sku-1")
    assert (audit.consistent, audit.remaining, audit.ordered_quantity) == (True, 2, 0), audit
