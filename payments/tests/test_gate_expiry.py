"""Pay or release under the gate, on the real MariaDB and the gate's Redis: the
database moves first, then Redis's stock, once per order by its marker; the
persisters paused and resumed around it; a late payment takes its units again or is
refunded; the audit reconciles Redis, the stream and MariaDB throughout."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from common.errors import SoldOut, Unavailable
from inventory.models import Stock, StockFlow
from orders.gate.returns import Owed, _owed, gate_owed_sweep, gate_retake, gate_return
from orders.gate.store import gate_keys, gate_redis
from orders.models import Order
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.selectors import sale_audit
from orders.tests.test_gate import persist
from payments.expiry import orders_expire
from payments.services import order_pay

WINDOW_S = 60


def later():
    return timezone.now() + timedelta(seconds=WINDOW_S + settings.FLASHSALE_PAYMENT_GRACE_S + 1)


def buy(i, sku="sku-1"):
    return order_create(sku=sku, quantity=1, user_id=f"u{i}", idempotency_key=f"k{i}").order_id


def redis_sale(sku="sku-1") -> dict:
    return gate_redis().hgetall(gate_keys(sku).sale)


@pytest.fixture
def gate_sale(db):
    sale_reset(sku="sku-1", stock=4, strategy="gate", payment_window_s=WINDOW_S)


@pytest.mark.django_db(transaction=True)
def test_unpaid_units_go_back_to_redis_once_and_sell_again_with_new_ids(gate_sale):
    placed = [buy(i) for i in range(4)]
    with pytest.raises(SoldOut):
        buy(9)
    assert orders_expire(now=later()).orders == 0  # nothing in MariaDB yet: the persisters are "paused"
    assert persist() == 4
    assert {o.status for o in Order.objects.all()} == {"pending"}
    order_pay(order_id=placed[0])
    done = orders_expire(now=later())
    assert (done.orders, done.units) == (3, 3)
    assert orders_expire(now=later()).orders == 0
    sale = redis_sale()
    assert (sale["stock"], sale["returned"], sale["accepted"]) == ("3", "3", "4")
    assert Stock.objects.get().quantity == 3
    # The three returned units sell again at once (no process remembers a sale with a
    # payment window sold out: its stock comes back), under order ids never used before.
    resold = [buy(10 + i) for i in range(3)]
    with pytest.raises(SoldOut):
        buy(20)
    assert not set(resold) & set(placed)
    audit = sale_audit(sku="sku-1")
    assert not audit.consistent and audit.gate.backlog == 3  # written by the persisters next
    persist()
    audit = sale_audit(sku="sku-1")
    assert audit.consistent and audit.gate.reconciled, audit
    assert (audit.ordered_quantity, audit.returned_quantity, audit.remaining) == (4, 3, 0)


@pytest.mark.django_db(transaction=True)
def test_a_second_return_of_an_order_does_nothing(gate_sale):
    buy(1)
    persist()
    orders_expire(now=later())
    order = Order.objects.get()
    again = gate_return(sku="sku-1", orders=[Owed(order.pk, 1, "u1")])
    assert again == {order.pk: "already"}
    assert redis_sale()["stock"] == "4"
    assert gate_owed_sweep() == 0  # nothing owed: the marker says it went back


@pytest.mark.django_db(transaction=True)
def test_units_owed_while_redis_was_out_of_reach_are_given_back_later(gate_sale, monkeypatch):
    buy(1), buy(2)
    persist()

    def unreachable(**kwargs):
        raise Unavailable("the gate's Redis cannot be reached", backend="redis")

    with monkeypatch.context() as patched:
        patched.setattr("orders.gate.returns.gate_return", unreachable)
        assert orders_expire(now=later()).orders == 2  # MariaDB moved: expired, stock back
    assert Stock.objects.get().quantity == 4 and redis_sale()["stock"] == "2"
    assert set(_owed["sku-1"]) == set(Order.objects.values_list("pk", flat=True))
    # Another sale's due orders meanwhile: the pass that pays what it owes expires them too.
    sale_reset(sku="sku-2", stock=1, strategy="atomic", payment_window_s=WINDOW_S)
    order_create(sku="sku-2", quantity=1, user_id="u9", idempotency_key="k9")
    assert orders_expire(now=later()).orders == 1
    assert "sku-1" not in _owed and redis_sale()["stock"] == "4"
    assert sale_audit(sku="sku-1").consistent and sale_audit(sku="sku-2").remaining == 1


@pytest.mark.django_db(transaction=True)
def test_an_expirer_that_stopped_before_redis_is_made_good_by_the_sweep(gate_sale, monkeypatch):
    buy(1)
    persist()
    monkeypatch.setattr("orders.gate.returns._owe", lambda sku, orders: None)  # it stops after its commit
    orders_expire(now=later())
    monkeypatch.undo()
    assert redis_sale()["stock"] == "3"
    assert gate_owed_sweep() == 1 and gate_owed_sweep() == 0
    assert redis_sale()["stock"] == "4"


@pytest.mark.django_db(transaction=True)
def test_a_late_payment_takes_the_units_again_while_redis_has_them(gate_sale):
    order_id = buy(1)
    persist()
    orders_expire(now=later())
    assert gate_retake(sku="sku-1", order=Owed(order_id, 1, "u1"))[:2] == ("retaken", 3)
    assert gate_retake(sku="sku-1", order=Owed(order_id, 1, "u1"))[:2] == ("already", None)
    assert redis_sale()["retaken"] == "1"


@pytest.mark.django_db(transaction=True)
def test_a_late_payment_before_the_return_reached_redis_keeps_its_units(gate_sale, monkeypatch):
    order_id = buy(1)
    persist()
    monkeypatch.setattr("orders.gate.returns._owe", lambda sku, orders: None)
    orders_expire(now=later())
    monkeypatch.undo()
    assert gate_retake(sku="sku-1", order=Owed(order_id, 1, "u1"))[:2] == ("kept", None)
    assert gate_owed_sweep() == 0  # the marker: a return now does nothing
    assert redis_sale()["stock"] == "3"


@pytest.mark.django_db(transaction=True)
def test_a_sale_with_a_window_stays_on_the_persisters_list_when_sold_out(gate_sale):
    from orders.gate.lifecycle import gate_listed, gate_unlist_finished

    for i in range(4):
        buy(i)
    persist()
    assert gate_unlist_finished(["sku-1"]) == [] and "sku-1" in gate_listed()


@pytest.mark.django_db(transaction=True)
@override_settings(FLASHSALE_PER_USER_LIMIT=1)
def test_an_expired_gate_order_frees_its_buyers_limit_in_redis(gate_sale):
    order_create(sku="sku-1", quantity=1, user_id="ann", idempotency_key="a1")
    persist()
    orders_expire(now=later())
    assert order_create(sku="sku-1", quantity=1, user_id="ann", idempotency_key="a2").order_id
    assert gate_redis().hget(gate_keys("sku-1").bought, "ann") == "1"
    assert StockFlow.objects.filter(kind="return").count() == 1
