"""``atomic``'s purchase as one stored-procedure call (``orders.transaction.procedure``), on the real
MariaDB: what it writes, what it refuses (writing nothing), how it nests in a
caller's transaction, and that the purchase's transaction is one round trip."""

import threading
import time

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from common.errors import Busy, LimitReached, SoldOut
from common.testing import start_thread
from inventory.models import Stock, StockFlow
from locking.backends.mysql import side_connection
from orders.models import BuyerQuota, Order
from orders.purchase import order_create
from orders.selectors import sale_audit


def buy(key: str, user: str = "u1", quantity: int = 1, sku: str = "sku-1"):
    return order_create(sku=sku, quantity=quantity, user_id=user, idempotency_key=key)


@pytest.mark.django_db(transaction=True)
def test_the_purchase_writes_the_order_the_stock_and_its_ledger_row_in_one_call(product_factory):
    product_factory(sku="sku-1", stock=10)
    began = time.perf_counter()
    with CaptureQueriesContext(connection) as queries:
        result = buy("k1", quantity=3)
    took_ms = (time.perf_counter() - began) * 1000
    writes = [q["sql"] for q in queries if not q["sql"].startswith("SELECT")]
    # One statement writes: no SET autocommit, no COMMIT of its own.
    assert len(writes) == 1 and writes[0].startswith("CALL flashsale_purchase(")
    order = Order.objects.get()
    assert (order.pk, order.quantity, order.user_id, order.idempotency_key, order.strategy,
            order.instance) == (result.order_id, 3, "u1", "k1", "atomic", "test")
    assert order.pk % 2 == 1  # MySQL's ids, odd as for every other strategy
    flow = StockFlow.objects.get()
    assert (flow.order_reference, flow.quantity, flow.quantity_before, flow.quantity_after, flow.segment,
            flow.operation_flag, flow.instance) == (str(order.pk), 3, 10, 7, 0, "k1", "test")
    assert Stock.objects.get().quantity == 7 and result.remaining == 7
    assert 0 <= result.timings.hold_ms <= took_ms  # a part of the call, however slow the machine
    assert sale_audit(sku="sku-1").consistent


@pytest.mark.django_db(transaction=True)
def test_the_call_keeps_every_character_of_the_buyer_and_the_key(product_factory):
    product_factory(sku="sku-1", stock=10)
    buy("k-ü-😀", user="u-ß-😀")  # four-byte UTF-8 through the procedure's parameters
    order = Order.objects.get()
    assert (order.user_id, order.idempotency_key) == ("u-ß-😀", "k-ü-😀")
    assert StockFlow.objects.get().operation_flag == "k-ü-😀"


@pytest.mark.django_db(transaction=True)
def test_sold_out_writes_nothing_and_says_what_is_left(product_factory):
    product_factory(sku="sku-1", stock=2)
    with pytest.raises(SoldOut) as refused:
        buy("k1", quantity=3)
    assert refused.value.extra["remaining"] == 2
    assert not Order.objects.exists() and not StockFlow.objects.exists() and Stock.objects.get().quantity == 2


@pytest.mark.django_db(transaction=True)
@override_settings(FLASHSALE_PER_USER_LIMIT=2)
def test_the_buyers_limit_is_counted_in_the_call_and_given_back_when_it_refuses(product_factory):
    product_factory(sku="sku-1", stock=3)
    buy("k1", quantity=2)
    with pytest.raises(LimitReached):
        buy("k2")
    with pytest.raises(SoldOut):  # u2 has room; the stock (1 left) has not
        buy("k3", user="u2", quantity=2)
    assert BuyerQuota.objects.get(user_id="u1").bought == 2
    assert BuyerQuota.objects.get(user_id="u2").bought == 0  # rolled back with the refused purchase
    assert Order.objects.count() == 1 and Stock.objects.get().quantity == 1


@pytest.mark.django_db(transaction=True)
def test_inside_a_callers_transaction_it_is_a_savepoint(product_factory):
    product_factory(sku="sku-1", stock=1)
    with transaction.atomic():
        Order.objects.none()  # the caller's transaction is open
        buy("k1")
        with pytest.raises(SoldOut):
            buy("k2", user="u2")  # rolls back to its savepoint only
        assert Order.objects.count() == 1
        transaction.set_rollback(True)  # the caller decides: nothing stays
    assert not Order.objects.exists() and Stock.objects.get().quantity == 1


@pytest.mark.django_db(transaction=True)
@override_settings(FLASHSALE_PURCHASE_DEADLINE_S=0.3)
def test_a_call_that_waited_for_the_row_past_the_deadline_commits_nothing(product_factory):
    product = product_factory(sku="sku-1", stock=5)
    holding, let_go = threading.Event(), threading.Event()

    def another_transaction_holds_the_row():
        with side_connection("default") as cursor:
            cursor.execute("START TRANSACTION")
            cursor.execute("SELECT quantity FROM inventory_stock WHERE product_id = %s FOR UPDATE",
                           [product.pk])
            holding.set()
            let_go.wait(10)
            cursor.execute("ROLLBACK")

    holder, _ = start_thread(another_transaction_holds_the_row)
    assert holding.wait(10)
    started = time.monotonic()
    threading.Timer(0.6, let_go.set).start()  # the call waits on the row past its 0.3 s
    with pytest.raises(Busy, match="deadline"):
        buy("k1")
    holder.join(10)
    assert time.monotonic() - started >= 0.6  # it did wait, then refused
    assert not Order.objects.exists() and not StockFlow.objects.exists() and Stock.objects.get().quantity == 5


@pytest.mark.django_db(transaction=True)
@override_settings(FLASHSALE_SECTION_DELAY_MS=200)
def test_the_race_delay_is_spent_holding_the_row(product_factory):
    product_factory(sku="sku-1", stock=5)
    assert buy("k1").timings.hold_ms >= 200  # the same work inside the section as the other strategies
