import time

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from common.errors import SaleReplaced, SoldOut, StaleLock, StockChanged
from common.strategies import Deduction
from common.testing import run_at_once, start_thread
from inventory.faults import stalled
from inventory.models import Stock, StockFlow
from inventory.selectors import stock_audit
from inventory.services import Deducted, Fence, Operation, product_reset, stock_deduct
from inventory.tests.ledger import ledger_of


def deduct(product, quantity, flag, deduction, fence=None) -> int:
    """The stock left after one deduction in a transaction of its own."""
    return deducted(product, quantity, flag, deduction, fence).remaining


def deducted(product, quantity, flag, deduction, fence=None) -> Deducted:
    """One deduction from segment 0 (fenced with ``fence``, if given)."""
    with transaction.atomic():
        return stock_deduct(product=product, quantity=quantity, operation=Operation(flag, flag),
                            deduction=deduction,
                            fences=None if fence is None else {0: fence})


RMW = Deduction.READ_MODIFY_WRITE


@pytest.mark.django_db
def test_a_fenced_write_records_its_token(product_factory):
    product = product_factory(stock=10)
    deduct(product, 1, "op-1", RMW, fence=Fence("setnx", 7))
    stock = Stock.objects.get(product=product)
    assert (stock.quantity, stock.fence_source, stock.fence) == (9, "setnx", 7)
    deduct(product, 1, "op-2", RMW, fence=Fence("setnx", 7))  # the same holding again
    deduct(product, 1, "op-3", RMW, fence=Fence("setnx", 9))
    assert Stock.objects.get(product=product).fence == 9


@pytest.mark.django_db
def test_an_older_token_is_refused_and_nothing_is_written(product_factory):
    product = product_factory(stock=10)
    deduct(product, 1, "op-new", RMW, fence=Fence("setnx", 8))
    with pytest.raises(StaleLock) as caught:
        deduct(product, 1, "op-stale", RMW, fence=Fence("setnx", 7))
    assert caught.value.status_code == 503 and caught.value.extra["fence"] == 7
    stock = Stock.objects.get(product=product)
    assert (stock.quantity, stock.fence) == (9, 8)
    assert list(StockFlow.objects.values_list("operation_flag", flat=True)) == ["op-new"]


@pytest.mark.django_db(transaction=True)
def test_a_stale_write_cannot_land_between_a_newer_holders_read_and_write(product_factory):
    """A (token 1) has read and stalls; B (token 2) comes while A still works. B
    waits on the row A stamped and then reads what A wrote: no lost update, even
    though A's lock (in this story) had expired. Without the stamp, B's write would
    overwrite A's."""
    import threading

    product = product_factory(stock=10)
    a_read, a_go = threading.Event(), threading.Event()

    def holder_a():
        def pause(point):
            if point == "read":
                a_read.set()
                a_go.wait(10)

        with stalled(pause):
            return deduct(product, 1, "op-a", RMW, fence=Fence("setnx", 1))

    a, a_box = start_thread(holder_a)
    assert a_read.wait(10)
    b, b_box = start_thread(lambda: deduct(product, 1, "op-b", RMW, fence=Fence("setnx", 2)))
    b.join(0.5)
    assert b.is_alive(), "B read the row A had stamped before A committed"
    a_go.set()
    a.join()
    b.join()
    assert (a_box.get("value"), b_box.get("value")) == (9, 8), (a_box, b_box)
    stock = Stock.objects.get(product=product)
    assert (stock.quantity, stock.fence) == (8, 2)
    assert StockFlow.objects.get(operation_flag="op-b").quantity_before == 9


@pytest.mark.django_db
def test_tokens_of_another_lock_are_not_compared(product_factory):
    # Switching strategy starts a new series: a small ZooKeeper sequence number is
    # not older than a clock-seeded Redis token.
    product = product_factory(stock=10)
    deduct(product, 1, "op-1", RMW, fence=Fence("redisson", 1_800_000_000_000_000))
    deduct(product, 1, "op-2", RMW, fence=Fence("zookeeper", 3))
    stock = Stock.objects.get(product=product)
    assert (stock.quantity, stock.fence_source, stock.fence) == (8, "zookeeper", 3)


@pytest.mark.django_db
def test_a_reset_starts_a_new_fencing_epoch(product_factory):
    product = product_factory(stock=10)
    deduct(product, 1, "op-1", RMW, fence=Fence("setnx", 50))
    product = product_reset(sku=product.sku, stock=10)
    deduct(product, 1, "op-2", RMW, fence=Fence("setnx", 1))
    assert Stock.objects.get(product=product).fence == 1


@pytest.mark.django_db
@pytest.mark.parametrize("deduction, fence", [
    (Deduction.CONDITIONAL_UPDATE, None), (Deduction.VERSIONED, None), (RMW, None), (RMW, Fence("setnx", 7))])
def test_a_deduction_for_a_sale_a_reset_replaced_takes_nothing_from_the_new_one(product_factory, deduction,
                                                                                 fence):
    old = product_factory(stock=10)  # the product as a purchase read it, with its sale
    product_reset(sku=old.sku, stock=10)
    with pytest.raises(SaleReplaced):
        deduct(old, 1, "op-1", deduction, fence=fence)
    assert list(Stock.objects.values_list("quantity", "fence")) == [(10, 0)]
    assert not StockFlow.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("deduction", [Deduction.CONDITIONAL_UPDATE, Deduction.VERSIONED])
def test_only_the_read_modify_write_takes_a_fence(product_factory, deduction):
    product = product_factory(stock=10)
    with pytest.raises(ValueError):
        deduct(product, 1, "op-1", deduction, fence=Fence("setnx", 1))


@pytest.mark.django_db
@pytest.mark.parametrize("deduction", list(Deduction))
def test_deduct_writes_stock_and_one_flow_row(product_factory, deduction):
    product = product_factory(stock=10)
    before = time.perf_counter()
    result = deducted(product, 3, "op-1", deduction)
    assert result.remaining == 7
    assert before < result.row_held_since < time.perf_counter()  # taken inside the call
    stock = Stock.objects.get(product=product)
    assert (stock.quantity, stock.initial_quantity, stock.version) == (7, 10, 1)
    flow = StockFlow.objects.get(operation_flag="op-1")
    assert (flow.quantity, flow.quantity_before, flow.quantity_after) == (3, 10, 7)
    assert flow.instance == "test"


@pytest.mark.django_db
@pytest.mark.parametrize("deduction", list(Deduction))
def test_sold_out_writes_nothing(product_factory, deduction):
    product = product_factory(stock=2)
    with pytest.raises(SoldOut) as caught:
        deduct(product, 3, "op-1", deduction)
    assert caught.value.extra == {"sku": product.sku, "requested": 3, "remaining": 2}
    assert Stock.objects.get(product=product).quantity == 2
    assert not StockFlow.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("deduction", list(Deduction))
def test_the_same_operation_flag_cannot_be_recorded_twice(product_factory, deduction):
    from django.db import IntegrityError

    product = product_factory(stock=10)
    deduct(product, 1, "op-1", deduction)
    with pytest.raises(IntegrityError):
        deduct(product, 1, "op-1", deduction)
    assert Stock.objects.get(product=product).quantity == 9  # the second rolled back whole


@pytest.mark.django_db(transaction=True)
def test_deduct_outside_a_transaction_is_refused(product_factory):
    product = product_factory()
    with pytest.raises(RuntimeError, match="transaction.atomic"):
        stock_deduct(product=product, quantity=1, operation=Operation("x", "x"),
                     deduction=Deduction.READ_MODIFY_WRITE)


@pytest.mark.django_db
def test_reset_restores_stock_clears_ledger_and_renames(product_factory):
    product = product_factory(sku="sku-r", stock=5, name="Old")
    deduct(product, 2, "op-1", Deduction.CONDITIONAL_UPDATE)
    product = product_reset(sku="sku-r", stock=8, name="New")
    stock = Stock.objects.get(product=product)
    assert (stock.quantity, stock.initial_quantity, stock.version) == (8, 8, 0)
    assert product.name == "New"
    assert not StockFlow.objects.filter(product=product).exists()


def _two_buyers_at_once(product, deduction) -> list[BaseException]:
    """Two transactions deduct 1 each, released together."""
    outcomes = run_at_once(lambda n: deduct(product, 1, f"op-{n}", deduction), 2)
    return [e for e in outcomes if e is not None]


# 300 ms between the read and the write: both buyers read before either writes,
# unless a thread starts 300 ms late, which is what makes the lost update certain.
@pytest.mark.django_db(transaction=True)
@override_settings(FLASHSALE_SECTION_DELAY_MS=300)
def test_read_modify_write_without_a_lock_loses_an_update(product_factory):
    product = product_factory(stock=10)
    assert _two_buyers_at_once(product, Deduction.READ_MODIFY_WRITE) == []
    audit = stock_audit(product=product, ordered_quantity=2, ledger=ledger_of(product, ["op-0", "op-1"]))
    assert audit.remaining == 9  # two sold, one taken off: the second write overwrote the first
    assert audit.lost_updates == 1 and not audit.consistent
    befores = StockFlow.objects.filter(product=product).values_list("quantity_before", flat=True)
    assert list(befores) == [10, 10]  # both writers read the same stock


@pytest.mark.django_db
def test_the_database_lets_an_unprotected_write_lose_its_update():
    """MariaDB 11.6 and later refuse the lost update above by default
    (``innodb_snapshot_isolation``); the stack turns that off, as MySQL behaves."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW GLOBAL VARIABLES LIKE 'innodb_snapshot_isolation'")
        found = cursor.fetchone()
    assert found is None or found[1] == "OFF", found


@pytest.mark.django_db(transaction=True)
@override_settings(FLASHSALE_SECTION_DELAY_MS=300)
def test_conditional_update_under_the_same_race_loses_nothing(product_factory):
    product = product_factory(stock=10)
    assert _two_buyers_at_once(product, Deduction.CONDITIONAL_UPDATE) == []
    audit = stock_audit(product=product, ordered_quantity=2, ledger=ledger_of(product, ["op-0", "op-1"]))
    assert audit.remaining == 8
    assert audit.lost_updates == 0 and audit.consistent


@pytest.mark.django_db(transaction=True)
@override_settings(FLASHSALE_SECTION_DELAY_MS=300)
def test_versioned_write_under_the_same_race_detects_the_change(product_factory):
    product = product_factory(stock=10)
    errors = _two_buyers_at_once(product, Deduction.VERSIONED)
    assert len(errors) == 1 and isinstance(errors[0], StockChanged)  # the second writer
    stock = Stock.objects.get(product=product)
    assert (stock.quantity, stock.version) == (9, 1)
    assert StockFlow.objects.filter(product=product).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(("deduction", "fence", "statements"), [
    # The UPDATE hands back what it wrote (LAST_INSERT_ID): no read after it.
    (Deduction.CONDITIONAL_UPDATE, None, ["UPDATE", "INSERT"]),
    # The stamp reads the quantity as it locks the row: no SELECT under the lock.
    (RMW, Fence("setnx", 1), ["UPDATE", "UPDATE", "INSERT"]),
    # Without a fence the read stays a plain SELECT: the weak strategies' honest race.
    (RMW, None, ["SELECT", "UPDATE", "INSERT"]),
    (Deduction.VERSIONED, None, ["SELECT", "UPDATE", "INSERT"]),
])
def test_a_deduction_is_as_few_statements_as_the_database_allows(product_factory, deduction, fence,
                                                                   statements):
    product = product_factory(stock=10)
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        deducted = stock_deduct(product=product, quantity=3, operation=Operation("op-1", "1"),
                                deduction=deduction, fences=None if fence is None else {0: fence})
    assert [q["sql"].split()[0] for q in queries.captured_queries] == statements
    assert deducted.remaining == 7
    flow = StockFlow.objects.get(operation_flag="op-1")
    assert (flow.quantity_before, flow.quantity_after) == (10, 7)


@pytest.mark.django_db
def test_the_last_unit_reads_back_as_zero_left(product_factory):
    product = product_factory(stock=2)
    assert deduct(product, 2, "op-1", Deduction.CONDITIONAL_UPDATE) == 0
    assert deduct(product_factory(sku="sku-2", stock=1), 1, "op-2", RMW, fence=Fence("setnx", 1)) == 0
