"""A gate sale rebuilt while its orders wait for their payment: the new sale adopts
them, so that their units come back to it once when they expire, and a late payment
takes them from it once.

The gate's Redis is a scratch server with its AOF (fsync always, as the stack's), on
loopback: it is killed (SIGKILL) and started again on the same port and directory.
The AOF brings back every key, but the server is another one (a new run id), so the
persisters rebuild the sale from MariaDB (``orders.gate.reconcile``): a new sale, a
new id block, loaded with the stock the database holds at that moment, which the
pending orders' units are not part of.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client, override_settings
from django.utils import timezone

from common.errors import SoldOut
from common.testing import start_thread
from inventory.models import Stock
from orders.gate import reconcile, returns
from orders.gate.reconcile import gate_failed_over
from orders.gate.returns import Owed, gate_owed_sweep, gate_retake
from orders.gate.store import gate_keys, gate_redis
from orders.models import GateSale, Order
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.selectors import sale_audit
from orders.tests.test_gate import persist
from payments.expiry import orders_expire
from payments.tests.conftest import delivered
from stack.scratch import start_redis

pytestmark = pytest.mark.django_db(transaction=True)

SKU = "rebuilt-1"
WINDOW_S = 5


def later():
    return timezone.now() + timedelta(seconds=WINDOW_S + settings.FLASHSALE_PAYMENT_GRACE_S + 1)


def buy(buyer: str):
    return order_create(sku=SKU, quantity=1, user_id=buyer, idempotency_key=f"key-{buyer}")


def pay(order_id: int):
    return Client().post(f"/api/orders/{order_id}/pay", {"payment_method": "pm_card_visa"},
                         content_type="application/json")


@pytest.fixture
def restartable_redis(tmp_path):
    """A gate Redis that keeps its AOF in ``tmp_path``: ``restart()`` kills it and
    starts another server on its port and its files."""
    args = ("--appendonly", "yes", "--appendfsync", "always", "--dir", str(tmp_path))
    servers = [start_redis(*args)]

    def restart():
        servers[-1].crash()
        servers.append(start_redis(*args, port=servers[-1].port))

    with override_settings(FLASHSALE_STRATEGY="gate", FLASHSALE_GATE_REDIS_URL=servers[0].url):
        yield restart
    for server in servers:
        server.stop()


@pytest.fixture
def rebuilt_with_two_pending(restartable_redis):
    """A sale of 3 with a payment window: two buyers buy one each (written, pending),
    then the gate's Redis restarts and the persisters rebuild the sale: 1 unit in it."""
    sale_reset(sku=SKU, stock=3, payment_window_s=WINDOW_S)
    pending = [buy("u1").order_id, buy("u2").order_id]
    assert persist() == 2
    restartable_redis()
    assert gate_failed_over([SKU]) == [SKU]
    persist()  # a persister finds it failed over, and rebuilds it
    assert gate_failed_over([SKU]) == [] and GateSale.objects.filter(product__sku=SKU).count() == 2
    assert gate_redis().hget(gate_keys(SKU).sale, "stock") == "1"
    return pending


def test_units_of_orders_pending_at_a_rebuild_come_back_to_the_new_sale_and_sell_again(
        rebuilt_with_two_pending):
    done = orders_expire(now=later())
    assert (done.orders, done.units) == (2, 2)
    # The unit never sold and the two given back: three new buyers are sold to.
    resold = [buy(f"n{i}").order_id for i in range(3)]
    with pytest.raises(SoldOut):
        buy("n3")
    assert not set(resold) & set(rebuilt_with_two_pending)
    assert gate_owed_sweep() == 0  # given back once: a sweep finds nothing more owed
    assert gate_redis().hget(gate_keys(SKU).sale, "stock") == "0"
    persist()
    audit = sale_audit(sku=SKU)
    assert audit.consistent and audit.gate.reconciled, audit
    assert (audit.ordered_quantity, audit.returned_quantity, audit.remaining) == (3, 2, 0)  # live, back, left


def test_a_late_payment_of_an_order_pending_at_a_rebuild_takes_its_units_from_the_new_sale_once(
        rebuilt_with_two_pending):
    late = Order.objects.get(pk=rebuilt_with_two_pending[0])
    orders_expire(now=later())
    owed = Owed(late.pk, late.quantity, late.user_id)
    assert gate_retake(sku=SKU, order=owed)[:2] == ("retaken", 2)  # 1 + 2 given back, 1 taken again
    assert gate_retake(sku=SKU, order=owed)[:2] == ("already", None)
    assert [buy(f"n{i}").order_id for i in range(2)]
    with pytest.raises(SoldOut):
        buy("n2")


def test_an_order_that_expired_before_the_rebuild_is_not_given_back_twice(restartable_redis):
    sale_reset(sku=SKU, stock=3, payment_window_s=WINDOW_S)
    buy("u1")
    persist()
    orders_expire(now=later())  # back in the database and in Redis
    restartable_redis()
    persist()  # rebuilt: the database's 3, the expired order's unit among them
    assert gate_redis().hget(gate_keys(SKU).sale, "stock") == "3"
    assert gate_owed_sweep() == 0 and gate_redis().hget(gate_keys(SKU).sale, "stock") == "3"
    assert Stock.objects.get(product__sku=SKU).quantity == 3


def test_a_late_payment_under_way_as_the_sale_is_rebuilt_leaves_redis_and_the_database_agreeing(
        restartable_redis, provider, monkeypatch):
    """The late payment has taken its units in Redis; before its database step, the
    gate's Redis restarts and a persister rebuilds the sale. The rebuilt sale must not
    hold the units the payment takes in the database (it would sell them again)."""
    sale_reset(sku=SKU, stock=2, payment_window_s=WINDOW_S)
    order_id = buy("u1").order_id
    persist()
    provider.webhook_url, url = None, provider.webhook_url  # its webhook comes late
    assert pay(order_id).status_code == 202
    provider.webhook_url = url
    assert orders_expire(now=later()).orders == 1
    retook, go, real = threading.Event(), threading.Event(), returns.gate_retake

    def retake_then_wait(**kwargs):
        taken = real(**kwargs)
        retook.set()
        go.wait(10)
        return taken

    monkeypatch.setattr(returns, "gate_retake", retake_then_wait)
    rebuilding, written = threading.Event(), reconcile.gate_written

    def written_then_say(**kwargs):
        written(**kwargs)
        rebuilding.set()  # the rebuild's transaction comes next

    monkeypatch.setattr(reconcile, "gate_written", written_then_say)
    try:
        provider.resend(provider.events[-1]["id"])
        assert retook.wait(10)
        restartable_redis()
        rebuild, _ = start_thread(persist)  # finds the sale failed over, and rebuilds it
        # The rebuild's transaction under way (then done, or waiting for the sale's
        # row, which the payment's transaction holds) before the payment goes on.
        assert rebuilding.wait(10)
        rebuild.join(0.3)
    finally:
        go.set()
    delivered(provider)
    rebuild.join(30)
    assert provider.relay.answers[-1][1]["outcome"] == "paid_late"
    persist()
    in_redis = gate_redis().hget(gate_keys(SKU).sale, "stock")
    assert in_redis == str(Stock.objects.get(product__sku=SKU).quantity) == "1"
    assert buy("n1").order_id
    with pytest.raises(SoldOut):
        buy("n2")
    persist()
    audit = sale_audit(sku=SKU)
    assert audit.consistent and audit.gate.reconciled and not audit.gate.dead_lettered, audit


def test_an_expiry_between_a_rebuilds_commit_and_its_opening_is_owed_to_the_new_sale(
        restartable_redis, monkeypatch):
    """The rebuild read the order pending and committed; before it opens the new sale
    in Redis, the order expires. Redis still holds the old sale, on a server that did
    not open it: the units must wait for the new sale, not go into the old one."""
    sale_reset(sku=SKU, stock=3, payment_window_s=WINDOW_S)
    buy("u1")
    persist()
    restartable_redis()
    opening, go, real = threading.Event(), threading.Event(), reconcile.gate_open

    def wait_then_open(**kwargs):
        opening.set()
        go.wait(10)
        return real(**kwargs)

    monkeypatch.setattr(reconcile, "gate_open", wait_then_open)
    rebuild, _ = start_thread(persist)
    try:
        assert opening.wait(10)  # rebuilt in MariaDB: the order pending in its snapshot
        assert orders_expire(now=later()).orders == 1  # back in MariaDB; Redis's is owed
    finally:
        go.set()
    rebuild.join(30)
    orders_expire(now=later())  # the next pass gives what it owes
    assert gate_redis().hget(gate_keys(SKU).sale, "stock") == "3" == str(Stock.objects.get().quantity)


def test_a_second_reconciler_opens_the_rebuilt_sale_from_one_snapshot(restartable_redis, monkeypatch):
    """The first reconciler committed the new sale (the order pending in its snapshot,
    0 units left) and stopped before opening it in Redis; the order then expired. The
    next reconciler opens the sale: the stock it loads and the orders it adopts must
    come from one snapshot, or the expired order's unit, marked returned in the orders
    and missing from the stock, is never in Redis."""
    sale_reset(sku=SKU, stock=1, payment_window_s=WINDOW_S)
    buy("u1")
    persist()
    restartable_redis()
    real = reconcile.gate_open
    monkeypatch.setattr(reconcile, "gate_open", lambda **kwargs: False)  # the first stops before Redis
    persist()
    assert gate_failed_over([SKU]) == [SKU]  # superseded in MariaDB; Redis holds the old sale
    assert orders_expire(now=later()).orders == 1  # back in MariaDB; Redis's is owed
    monkeypatch.setattr(reconcile, "gate_open", real)
    persist()  # the next reconciler finds the new sale made, and opens it
    assert gate_failed_over([SKU]) == []
    orders_expire(now=later())  # whatever is still owed
    assert gate_redis().hget(gate_keys(SKU).sale, "stock") == "1" == str(Stock.objects.get().quantity)
