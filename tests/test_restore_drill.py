"""The restore drill (``stack.drill``) on this run's test database: a database with a
sale in it (orders in every status, the ledger's sales and returns, a payment, the
purchase's stored procedures) comes back whole from the nightly backup's dump, and
each way a dump can come back short is caught."""

import threading
import uuid

import pytest
from django.db import connection

from inventory.models import Product, Stock, StockFlow
from orders.models import Order
from payments.models import Payment
from stack.config import StackConfig
from stack.drill import DUMP_OPTIONS, DrillError, restore_drill

pytestmark = pytest.mark.django_db(transaction=True)  # committed: the dump reads another session


@pytest.fixture
def database():
    """A sale's rows, committed, in this run's test database; its name."""
    product = Product.objects.create(sku="drill-1", name="drill", sale=1, payment_window_s=60)
    Stock.objects.create(product=product, quantity=6, initial_quantity=10, sale=1)
    statuses = [Order.Status.PAID, Order.Status.PENDING, Order.Status.EXPIRED, Order.Status.PAID,
                Order.Status.PENDING]
    for n, status in enumerate(statuses):
        order = Order.objects.create(user_id=f"buyer-{n}", product=product, quantity=1, status=status,
                                     idempotency_key=f"k-{n}", instance="app1", strategy="atomic")
        StockFlow.objects.create(product=product, quantity=1, operation_flag=f"k-{n}",
                                 order_reference=str(order.pk), quantity_before=10 - n, quantity_after=9 - n,
                                 instance="app1")
        if status is Order.Status.EXPIRED:
            StockFlow.objects.create(product=product, quantity=1, kind=StockFlow.Kind.RETURN,
                                     operation_flag=f"return-{n}", order_reference=str(order.pk),
                                     quantity_before=5, quantity_after=6, instance="expirer")
        if status is Order.Status.PAID:
            Payment.objects.create(intent_id=f"pi_{n}", order=order, amount=1999, currency="eur",
                                   status=Payment.Status.SUCCEEDED)
    return connection.settings_dict["NAME"]


def test_a_database_with_a_sale_comes_back_whole(database):
    drill = restore_drill(StackConfig.from_env(), database)
    assert drill.differences == [], drill.report()
    assert drill.copy == drill.source
    # What it compared is what the fixture wrote, not two empty databases.
    assert drill.source.units["orders by status"] == (("expired", 1, 1), ("paid", 2, 2), ("pending", 2, 2))
    assert drill.source.units["ledger by kind"] == (("return", 1, 1), ("sale", 5, 5))
    assert drill.source.units["stock"] == (("left and started with", 6, 10),)
    assert drill.source.units["payments by status"] == (("succeeded", 2, 3998),)
    assert {"PROCEDURE flashsale_purchase", "PROCEDURE flashsale_stock_take"} <= drill.source.routines.keys()
    assert drill.dump.exists() and "the copy holds what the source holds" in drill.report()


def test_a_dump_without_the_stored_procedures_is_caught(database):
    """The purchase under ``atomic`` is a stored procedure: a dump without
    ``--routines`` restores a database that cannot sell."""
    drill = restore_drill(StackConfig.from_env(), database,
                          options=[option for option in DUMP_OPTIONS if option != "--routines"])
    assert "PROCEDURE flashsale_purchase: missing from the copy" in drill.differences
    assert "THE COPY DIFFERS" in drill.report()


def test_a_dump_that_left_a_table_out_is_caught(database):
    drill = restore_drill(StackConfig.from_env(), database,
                          options=[*DUMP_OPTIONS, f"--ignore-table={database}.orders_order"])
    assert any(line.startswith("table orders_order:") for line in drill.differences), drill.differences
    assert any(line.startswith("orders by status:") for line in drill.differences), drill.differences


def test_a_database_that_never_holds_still_is_not_compared(database):
    """Figures read while rows arrive cannot be compared with a copy: the drill
    dumps again, and after its tries says so rather than report a difference."""
    product = Product.objects.get(sku="drill-1")
    writing = threading.Event()
    done = threading.Event()

    def write() -> None:
        from django.db import connection as own

        try:
            while not done.is_set():
                Order.objects.create(user_id="late", product=product, quantity=1,
                                     idempotency_key=uuid.uuid4().hex, instance="app1", strategy="atomic")
                writing.set()
        finally:
            own.close()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert writing.wait(10)
        with pytest.raises(DrillError, match="changed during each of 3 dumps"):
            restore_drill(StackConfig.from_env(), database)
    finally:
        done.set()
        writer.join()
