"""Expiry on the real servers: an unpaid order's units go back on sale once, under
every strategy that sells in a transaction, and sell again."""

from __future__ import annotations

import json
import random
import threading
from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.db import DatabaseError, connection, connections
from django.test import override_settings
from django.utils import timezone

from common.errors import Busy, LimitReached, OutcomeUnknown, SoldOut, Unavailable
from common.testing import run_at_once
from inventory.models import Product, Stock, StockFlow
from locking.backends.mysql import side_connection
from orders.giveback import return_flag
from orders.models import Order
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.salestate import sale_state_get, sale_state_sold_out
from orders.selectors import sale_audit
from orders.transaction.giveback import transaction_take_again
from payments.expiry import _products_due_compiled, expiry_pass, orders_expire, products_due
from payments.services import order_pay

# Every strategy that sells in a transaction and is correct: a return beside its
# purchases must be too.
CORRECT = ["atomic", "optimistic", "setnx", "redisson", "zookeeper", "mysql", "mysql-for-update"]

WINDOW_S = 60


def later() -> datetime:
    """A moment past every window opened now, and its grace: each pending order is due."""
    return timezone.now() + timedelta(seconds=WINDOW_S + settings.FLASHSALE_PAYMENT_GRACE_S + 1)


def buy(i: int, quantity: int = 1, sku: str = "sku-1"):
    return order_create(sku=sku, quantity=quantity, user_id=f"u{i}", idempotency_key=f"k{i}-{sku}")


def audited_consistent(sku: str = "sku-1"):
    audit = sale_audit(sku=sku)
    assert audit.consistent, audit
    return audit


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("segments", [1, 3])
@pytest.mark.parametrize("strategy", CORRECT)
def test_unpaid_units_go_back_once_and_sell_again(strategy, segments):
    sale_reset(sku="sku-1", stock=6, strategy=strategy, segments=segments, payment_window_s=WINDOW_S)
    placed = [buy(i, quantity=2) for i in range(3)]
    with pytest.raises(SoldOut):
        buy(9)
    orders = {o.pk: o for o in Order.objects.all()}
    assert {o.status for o in orders.values()} == {"pending"}
    assert all(abs(o.expires_at - o.created_at - timedelta(seconds=WINDOW_S)) < timedelta(seconds=1)
               for o in orders.values())
    assert order_pay(order_id=placed[0].order_id) == "paid"

    assert orders_expire(now=timezone.now()).orders == 0  # nothing due yet
    done = orders_expire(now=later())
    assert (done.orders, done.units) == (2, 4)
    assert orders_expire(now=later()).orders == 0  # nothing twice
    statuses = dict(Order.objects.values_list("pk", "status"))
    paid, *unpaid = (p.order_id for p in placed)
    assert statuses == {paid: "paid", unpaid[0]: "expired", unpaid[1]: "expired"}
    assert sum(Stock.objects.values_list("quantity", flat=True)) == 4
    returns = StockFlow.objects.filter(kind="return")
    assert {r.operation_flag for r in returns} == {return_flag(order_id) for order_id in unpaid}
    audit = audited_consistent()
    assert (audit.ordered_quantity, audit.returned_quantity, audit.remaining) == (2, 4, 4)

    # The sale said sold out; the returned units sell again, and no more than them.
    resold = [buy(10 + i) for i in range(4)]
    assert all(r.order_id for r in resold)
    with pytest.raises(SoldOut):
        buy(20)
    audit = audited_consistent()
    assert (audit.ordered_quantity, audit.remaining, audit.oversold) == (6, 0, 0)


@pytest.mark.django_db(transaction=True)
def test_without_a_window_orders_are_final_and_nothing_expires():
    sale_reset(sku="sku-1", stock=3, strategy="atomic")
    buy(1)
    order = Order.objects.get()
    assert (order.status, order.expires_at) == ("placed", None)
    assert orders_expire(now=later()).orders == 0
    assert order_pay(order_id=order.pk) == "placed"  # nothing to pay: unchanged
    assert audited_consistent().remaining == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("strategy", ["atomic", "setnx"])
def test_two_expirers_over_the_same_due_orders_return_each_unit_once(strategy):
    sale_reset(sku="sku-1", stock=300, strategy=strategy, segments=2, payment_window_s=WINDOW_S)
    for i in range(300):
        buy(i)
    due = later()
    outcomes = run_at_once(lambda _: orders_expire(now=due, batch=7), 3)
    assert outcomes == [None, None, None]
    assert set(Order.objects.values_list("status", flat=True)) == {"expired"}
    assert StockFlow.objects.filter(kind="return").count() == 300
    audit = audited_consistent()
    assert (audit.remaining, audit.returned_quantity, audit.ordered_quantity) == (300, 300, 0)


@pytest.mark.django_db(transaction=True)
def test_pay_and_expire_raced_over_a_thousand_orders_each_ends_one_way():
    sale_reset(sku="sku-1", stock=1000, strategy="atomic", payment_window_s=WINDOW_S)
    for i in range(1000):
        buy(i)
    ids = list(Order.objects.values_list("pk", flat=True))
    random.Random(7).shuffle(ids)
    due, paid = later(), {}

    def payer():
        for order_id in ids:
            paid[order_id] = order_pay(order_id=order_id)
        connection.close()

    def expirer():
        while orders_expire(now=due, batch=5).orders:
            pass
        connection.close()

    threads = [threading.Thread(target=target) for target in (payer, expirer, expirer)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = dict(Order.objects.values_list("pk", "status"))
    assert set(statuses.values()) <= {"paid", "expired"}
    # The payer's answer is the order's final status: each payment won or lost, never both.
    assert paid == statuses
    returns = StockFlow.objects.filter(kind="return")
    returned = {int(r) for r in returns.values_list("order_reference", flat=True)}
    assert returned == {pk for pk, status in statuses.items() if status == "expired"}
    audit = audited_consistent()
    assert audit.remaining == len(returned)
    assert 0 < len(returned) < 1000, "the race did not race: widen it"


@pytest.mark.django_db(transaction=True)
@override_settings(FLASHSALE_PER_USER_LIMIT=1)
def test_an_expired_order_frees_its_buyers_limit():
    sale_reset(sku="sku-1", stock=5, strategy="atomic", payment_window_s=WINDOW_S)
    order_create(sku="sku-1", quantity=1, user_id="ann", idempotency_key="a1")
    with pytest.raises(LimitReached):
        order_create(sku="sku-1", quantity=1, user_id="ann", idempotency_key="a2")
    orders_expire(now=later())
    assert order_create(sku="sku-1", quantity=1, user_id="ann", idempotency_key="a3").order_id
    audited_consistent()


@pytest.mark.django_db(transaction=True)
def test_a_payment_in_the_grace_after_the_window_is_in_time():
    sale_reset(sku="sku-1", stock=1, strategy="atomic", payment_window_s=WINDOW_S)
    order_id = buy(1).order_id
    just_after = timezone.now() + timedelta(seconds=WINDOW_S + settings.FLASHSALE_PAYMENT_GRACE_S / 2)
    assert orders_expire(now=just_after).orders == 0
    assert order_pay(order_id=order_id) == "paid"


@pytest.mark.django_db(transaction=True)
def test_a_sold_out_mark_from_before_a_return_says_nothing():
    sale_reset(sku="sku-1", stock=1, strategy="atomic", payment_window_s=WINDOW_S)
    before = sale_state_get(sku="sku-1")  # a purchase reads the state...
    buy(1)
    assert sale_state_get(sku="sku-1").sold_out
    orders_expire(now=later())  # ...a return commits and counts itself...
    sale_state_sold_out(sku="sku-1", strategy="atomic", sale=before.opening.sale,
                        returns=before.returns)  # ...then its mark lands
    assert not sale_state_get(sku="sku-1").sold_out
    assert buy(2).order_id
    assert sale_state_get(sku="sku-1").sold_out


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("strategy", ["atomic", "redisson"])
def test_a_return_sells_again_as_soon_as_it_committed(monkeypatch, strategy):
    """The returned unit sells from the moment its commit can be seen: not only once the
    expirer has counted the return after it (a slow machine may put seconds between)."""
    from orders.transaction import giveback

    sale_reset(sku="sku-1", stock=1, strategy=strategy, payment_window_s=WINDOW_S)
    buy(1)
    assert sale_state_get(sku="sku-1").sold_out
    counted, bought = giveback.sale_state_returned, []

    def count_after_a_purchase(*, sku: str) -> bool:
        if not connection.in_atomic_block and not bought:  # the count after the commit
            assert sale_audit(sku=sku).returned_quantity == 1  # the return can be seen
            bought.append(buy(2))
        return counted(sku=sku)

    monkeypatch.setattr(giveback, "sale_state_returned", count_after_a_purchase)
    assert orders_expire(now=later()).orders == 1
    assert bought and bought[0].remaining == 0
    audited_consistent()


@pytest.mark.django_db(transaction=True)
def test_a_pass_after_the_database_dropped_the_expirers_connection_connects_anew():
    """A MariaDB restart ends the expirer's connection: a pass on it fails, and so would
    every later one; an expirer's pass connects anew."""
    sale_reset(sku="sku-1", stock=3, strategy="atomic", payment_window_s=WINDOW_S)
    for i in range(2):
        buy(i)
    Order.objects.update(expires_at=timezone.now() - timedelta(hours=1))  # due, grace and all
    with side_connection("default") as cursor:
        cursor.execute("KILL %s", [connection.connection.thread_id()])
    with pytest.raises(DatabaseError):
        orders_expire()
    with pytest.raises(DatabaseError):
        orders_expire()  # the same dead connection: what the expirer's loop met, pass after pass
    assert expiry_pass().orders == 2
    assert Stock.objects.get().quantity == 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("strategy", ["mysql", "mysql-for-update"])
def test_a_late_payment_whose_commit_fails_as_its_lock_releases_is_not_said_paid(monkeypatch, strategy):
    """Under the MySQL locks the release is the COMMIT: if the database goes as it
    runs, the late payment must not answer ``paid_late`` (the webhook would say 200,
    the provider would stop delivering, and the order would stay expired with the
    buyer's money taken)."""
    sale_reset(sku="sku-1", stock=2, strategy=strategy, payment_window_s=WINDOW_S)
    order_id = buy(1).order_id
    assert orders_expire(now=later()).orders == 1
    wrapper = connections["default"]
    wrapper.ensure_connection()
    real = wrapper._commit

    def the_database_goes_down(*args):
        with side_connection("default") as cursor:
            cursor.execute("KILL %s", [wrapper.connection.thread_id()])
        monkeypatch.setitem(wrapper.settings_dict, "PORT", 1)  # and stays down: reconnecting fails
        return real(*args)

    monkeypatch.setattr(wrapper, "_commit", the_database_goes_down)
    with pytest.raises((Busy, OutcomeUnknown, Unavailable)):
        transaction_take_again(Order.objects.select_related("product").get(pk=order_id))
    monkeypatch.undo()  # back up
    wrapper.close()
    assert Order.objects.get(pk=order_id).status == "expired" and Stock.objects.get().quantity == 2
    # The provider delivers again: now it is paid, once.
    order = Order.objects.select_related("product").get(pk=order_id)
    assert transaction_take_again(order) == "paid_late"
    assert Order.objects.get(pk=order_id).status == "paid" and Stock.objects.get().quantity == 1


def rows_read(plan: object, index: str) -> float:
    """The rows MariaDB read through ``index``, every loop, by an ``ANALYZE FORMAT=JSON`` plan."""
    if isinstance(plan, list):
        return sum(rows_read(part, index) for part in plan)
    if not isinstance(plan, dict):
        return 0.0
    read = (plan.get("r_loops") or 0) * (plan.get("r_rows") or 0) if plan.get("key") == index else 0.0
    return read + sum(rows_read(value, index) for value in plan.values())


@pytest.mark.django_db(transaction=True)
def test_finding_the_due_products_reads_one_index_row_a_product_not_every_order():
    for sku in ("sku-1", "sku-2"):
        sale_reset(sku=sku, stock=1000, strategy="atomic", payment_window_s=WINDOW_S)
    products = list(Product.objects.filter(sku__in=["sku-1", "sku-2"]).order_by("sku"))
    now = timezone.now()
    # Each product: 100 orders due, 100 pending whose windows are still open.
    Order.objects.bulk_create(
        Order(user_id=f"u{i}", product=product, quantity=1, idempotency_key=f"due-{product.sku}-{i}",
              instance="test", strategy="atomic", status=Order.Status.PENDING,
              expires_at=now + timedelta(seconds=i - 100))
        for product in products for i in range(200))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE TABLE orders_order")
    due = products_due(now=now)
    assert [p.sku for p in due] == ["sku-1", "sku-2"]
    sql, params = due.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE FORMAT=JSON " + sql, params)
        plan = json.loads(cursor.fetchone()[0])
    # One row of the order_due index a product, its first pending: not the 400 orders'
    # (an EXISTS of a due order became a semi-join that read them all).
    assert rows_read(plan, "order_due") == len(products), plan


@pytest.mark.django_db(transaction=True)
def test_the_expirers_compiled_statement_finds_what_products_due_finds():
    # The long-running expirer asks by products_due's statement, compiled once
    # (payments.expiry._products_due_compiled): at each time, the same products.
    for sku in ("sku-1", "sku-2", "sku-3"):
        sale_reset(sku=sku, stock=100, strategy="atomic", payment_window_s=WINDOW_S)
    now = timezone.now()
    for i, sku in enumerate(("sku-1", "sku-2")):  # sku-3: nothing pending
        Order.objects.bulk_create(
            Order(user_id=f"u{j}", product=Product.objects.get(sku=sku), quantity=1,
                  idempotency_key=f"c-{sku}-{j}", instance="test", strategy="atomic",
                  status=Order.Status.PENDING, expires_at=now + timedelta(seconds=10 * i + j))
            for j in range(3))
    for seconds in (-1, 0, 5, 10, 15):
        at = now + timedelta(seconds=seconds)
        assert ([p.sku for p in _products_due_compiled(now=at)]
                == [p.sku for p in products_due(now=at)]), seconds
    assert [p.sku for p in _products_due_compiled(now=now + timedelta(seconds=5))] == ["sku-1"]
    assert [p.sku for p in _products_due_compiled(now=now + timedelta(seconds=15))] == ["sku-1", "sku-2"]
