"""The sale's audit: the ledger matched to the orders in SQL, the gate's percentiles
picked by the database, a memory that does not grow with the sale, and the API's
answer kept only when it was costly."""

import datetime as dt
import time
import tracemalloc

import pytest
from django.core.cache import cache
from django.test import override_settings
from rest_framework.test import APIClient

from benchmarks.sales import sold_out_in_sql
from inventory.models import StockFlow
from orders import selectors
from orders.figures import percentile
from orders.models import Order
from orders.purchase import order_create
from orders.selectors import sale_audit


@pytest.fixture
def sold(product_factory):
    """sku-1, 10 units, three orders of one unit each."""
    product = product_factory(stock=10)
    for n in range(3):
        order_create(sku="sku-1", quantity=1, user_id=f"u{n}", idempotency_key=f"k{n}")
    return product


@pytest.mark.django_db
def test_a_clean_sale_is_consistent(sold):
    audit = sale_audit(sku="sku-1")
    assert (audit.orders, audit.flow_rows, audit.consistent) == (3, 3, True)


@pytest.mark.django_db
def test_a_ledger_row_that_names_no_order_is_found(sold):
    flow = StockFlow.objects.filter(product=sold).first()
    StockFlow.objects.create(product=sold, segment=0, quantity=0, operation_flag="stray",
                             order_reference="999999", quantity_before=7, quantity_after=7, instance="t")
    assert not sale_audit(sku="sku-1").consistent
    StockFlow.objects.filter(operation_flag="stray").update(order_reference=flow.order_reference)
    assert sale_audit(sku="sku-1").consistent  # a second row of an order: a second segment's


@pytest.mark.django_db
@pytest.mark.parametrize("spelling", ["0{}", "{} ", "{}.0", " {}"])
def test_a_reference_names_an_order_only_as_its_id_is_written(sold, spelling):
    """The join compares numbers to find the order by its key; "012" is still not 12."""
    flow = StockFlow.objects.filter(product=sold).first()
    StockFlow.objects.filter(pk=flow.pk).update(order_reference=spelling.format(flow.order_reference))
    audit = sale_audit(sku="sku-1")
    assert (audit.orders, audit.flow_rows, audit.consistent) == (3, 3, False)


@pytest.mark.django_db
def test_an_order_without_its_ledger_row_is_found(sold):
    StockFlow.objects.filter(product=sold).first().delete()
    assert not sale_audit(sku="sku-1").consistent


@pytest.mark.django_db
def test_an_order_of_another_product_names_nothing_here(sold, product_factory):
    other = product_factory(sku="sku-2", stock=5)
    theirs = order_create(sku="sku-2", quantity=1, user_id="u9", idempotency_key="k9")
    StockFlow.objects.filter(product=sold).first().delete()
    StockFlow.objects.create(product=sold, segment=0, quantity=1, operation_flag="theirs",
                             order_reference=str(theirs.order_id), quantity_before=8, quantity_after=7,
                             instance="t")
    assert not sale_audit(sku="sku-1").consistent
    assert sale_audit(sku=other.sku).consistent


@pytest.mark.django_db
@pytest.mark.parametrize("n", [1, 2, 7, 100, 101])
def test_the_confirm_percentiles_are_the_nearest_rank_ones(product_factory, n):
    product = product_factory(stock=1000)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    waits_us = [(k * 7919) % 1000 * 1000 + k for k in range(n)]  # distinct, unordered
    Order.objects.bulk_create(
        Order(pk=1000 + k, product=product, user_id=f"u{k}", quantity=1, idempotency_key=f"k{k}",
              instance="t", strategy="gate", accepted_at=start) for k in range(n))
    for k, wait in enumerate(waits_us):  # created_at is set at insert: written afterwards
        Order.objects.filter(pk=1000 + k).update(created_at=start + dt.timedelta(microseconds=wait))
    Order.objects.create(pk=5000, product=product, user_id="out", quantity=1, idempotency_key="out",
                         instance="t", strategy="gate", accepted_at=start)  # past the block
    waited_ms = [w / 1000 for w in waits_us]
    assert selectors._confirm_times(product.pk, 1000, 5000) == (
        n, percentile(waited_ms, 50), percentile(waited_ms, 99))
    assert selectors._confirm_times(product.pk, 6000, 7000) == (0, None, None)


def _peak_bytes(sku: str) -> int:
    tracemalloc.start()
    try:
        audit = sale_audit(sku=sku)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        assert audit.consistent and audit.remaining == 0


@pytest.mark.django_db
def test_the_audit_takes_no_more_memory_for_a_sale_a_hundred_times_larger():
    sold_out_in_sql("small", 50)
    sold_out_in_sql("large", 5000)
    sale_audit(sku="small")  # the first call builds what later calls reuse
    small, large = _peak_bytes("small"), _peak_bytes("large")
    # Holding the large sale's ids alone would take over 300 KB.
    assert large < small + 20_000, (small, large)


@pytest.mark.django_db
def test_the_api_keeps_a_large_sales_audit_for_its_interval_and_a_smaller_ones_never(sold, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(selectors.time, "monotonic", lambda: clock[0])
    selectors._recent.clear()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Token test-admin-token")

    def orders() -> int:
        return api.get("/api/products/sku-1/audit").json()["orders"]

    def buy(n: int) -> None:
        order_create(sku="sku-1", quantity=1, user_id=f"u{n}", idempotency_key=f"k{n}")

    with override_settings(FLASHSALE_AUDIT_KEEP_MS=1000, FLASHSALE_AUDIT_KEEP_FROM_ORDERS=4):
        assert orders() == 3  # under 4 orders: not kept
        buy(3)
        assert orders() == 4  # at once; and 4 orders: kept from here
        buy(4)
        clock[0] += 0.9
        assert orders() == 4  # the kept one, 0.9 s old
        clock[0] += 0.1
        assert orders() == 5  # its second is over
    with override_settings(FLASHSALE_AUDIT_KEEP_MS=1000, FLASHSALE_AUDIT_KEEP_FROM_ORDERS=10_000):
        clock[0] += 1.0
        buy(5)
        assert orders() == 6
        buy(6)
        assert orders() == 7  # a small sale, at the default: always as of now


@pytest.mark.django_db
def test_the_summary_is_one_audit_a_period_for_everyone_and_never_older(sold, monkeypatch):
    loads = []
    load = selectors._summaries.load
    monkeypatch.setattr(selectors._summaries, "load", lambda sku: loads.append(sku) or load(sku))

    def buy(n: int) -> None:
        order_create(sku="sku-1", quantity=1, user_id=f"u{n}", idempotency_key=f"k{n}")

    with override_settings(FLASHSALE_AUDIT_SUMMARY_MS=60_000):
        first = selectors.sale_summary_get(sku="sku-1")
        buy(3)
        # However many ask (every instance reads the same Redis entry): one audit.
        again = [selectors.sale_summary_get(sku="sku-1") for _ in range(50)]
        assert loads == ["sku-1"] and {s.orders for s in again} == {first.orders} == {3}
        assert (first.sold, first.remaining, first.consistent) == (3, 7, True)
    with override_settings(FLASHSALE_AUDIT_SUMMARY_MS=200):
        cache.clear()
        selectors.sale_summary_get(sku="sku-1")
        buy(4)
        time.sleep(0.25)  # past the period: Redis no longer has the entry
        assert selectors.sale_summary_get(sku="sku-1").orders == 5
