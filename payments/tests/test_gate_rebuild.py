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

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from common.errors import SoldOut
from inventory.models import Stock
from orders.gate.reconcile import gate_failed_over
from orders.gate.returns import Owed, gate_retake
from orders.gate.store import gate_keys, gate_redis
from orders.models import GateSale, Order
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.selectors import sale_audit
from orders.tests.test_gate import persist
from payments.expiry import gate_owed_sweep, orders_expire
from stack.scratch import start_redis

pytestmark = pytest.mark.django_db(transaction=True)

SKU = "rebuilt-1"
WINDOW_S = 5


def later():
    return timezone.now() + timedelta(seconds=WINDOW_S + settings.FLASHSALE_PAYMENT_GRACE_S + 1)


def buy(buyer: str):
    return order_create(sku=SKU, quantity=1, user_id=buyer, idempotency_key=f"key-{buyer}")


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
    assert gate_retake(sku=SKU, order=owed) == ("retaken", 2)  # 1 + 2 given back, 1 taken again
    assert gate_retake(sku=SKU, order=owed) == ("already", None)
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
