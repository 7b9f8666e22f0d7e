"""The live sales' gauges (orders.watch), on the real MariaDB and Redis: stock
left and units sold past the stock, by strategy, over the sales reset in the last
hour; an oversell under a strategy that claims none is labelled so."""

import time

import pytest
from django.test import override_settings
from django_redis import get_redis_connection

from common.metrics import SourcesRead
from orders.models import Order
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.watch import LIVE, LIVE_SECONDS, SaleWatchCollector, _read

pytestmark = pytest.mark.django_db


def gauges() -> dict[tuple[str, ...], float]:  # (the gauge, its labels)
    _read.clear()  # what a process read lately: read afresh
    return {(family.name, *sample.labels.values()): sample.value
            for family in SaleWatchCollector().collect() for sample in family.samples}


def orders_past_the_stock(sku: str, strategy: str, count: int) -> None:
    """Orders the stock never served, as a lost update leaves them."""
    from inventory.models import Product

    product = Product.objects.get(sku=sku)
    for i in range(count):
        Order.objects.create(user_id=f"lost-{i}", product=product, quantity=1,
                             idempotency_key=f"lost-{sku}-{i}", instance="test", strategy=strategy)


def test_stock_left_and_units_sold_past_it_by_strategy():
    sale_reset(sku="w-1", stock=10, strategy="setnx")
    sale_reset(sku="w-2", stock=5, strategy="setnx")
    sale_reset(sku="w-3", stock=2, strategy="none")
    for i in range(3):
        order_create(sku="w-1", quantity=1, user_id=f"u{i}", idempotency_key=None)
    orders_past_the_stock("w-3", "none", 3)  # 3 orders, the stock untouched: 1 past its 2
    assert gauges() == {
        ("flashsale_sales_live", "none", "false"): 1, ("flashsale_sales_live", "setnx", "true"): 2,
        ("flashsale_sale_stock_left", "none", "false"): 2, ("flashsale_sale_stock_left", "setnx", "true"): 12,
        ("flashsale_sale_oversold_units", "none", "false"): 1,
        ("flashsale_sale_oversold_units", "setnx", "true"): 0,
        ("flashsale_pending_overdue_seconds", "none", "false"): 0,
        ("flashsale_pending_overdue_seconds", "setnx", "true"): 0,
        ("flashsale_sale_orders", "none", "placed"): 3, ("flashsale_sale_orders", "setnx", "placed"): 3,
    }
    orders_past_the_stock("w-2", "setnx", 7)  # what FlashsaleOversold pages for
    assert gauges()[("flashsale_sale_oversold_units", "setnx", "true")] == 2


def test_a_sale_reset_over_an_hour_ago_is_no_longer_watched():
    sale_reset(sku="w-old", stock=4, strategy="atomic")
    get_redis_connection("default").zadd(LIVE, {"w-old": time.time() - LIVE_SECONDS - 1})
    assert gauges() == {}
    assert get_redis_connection("default").zscore(LIVE, "w-old") is None  # and forgotten


def test_a_database_that_cannot_be_reached_yields_no_gauge_and_the_collectors_up_says_so(monkeypatch, caplog):
    from django.db import OperationalError

    def unreachable():
        raise OperationalError(2002, "Can't connect to server")

    monkeypatch.setattr("orders.watch.live_figures", unreachable)
    _read.clear()
    samples = [(family.name, sample.labels, sample.value)
               for family in SourcesRead([SaleWatchCollector()]).collect() for sample in family.samples]
    assert samples == [("flashsale_collector_up", {"collector": "sales"}, 0)]
    assert "sales: not read for /metrics" in caplog.text


@override_settings(FLASHSALE_STRATEGY="atomic")
def test_a_product_without_a_strategy_of_its_own_counts_under_the_one_its_orders_were_sold_under():
    """Reset without a strategy, it sold under the deployment's of the moment (``none``,
    say, before the deployment changed to ``atomic``): its oversell is none's, and
    pages nobody."""
    sale_reset(sku="w-4", stock=2)
    orders_past_the_stock("w-4", "none", 3)
    figures = gauges()
    assert figures[("flashsale_sale_oversold_units", "none", "false")] == 1
    assert ("flashsale_sale_oversold_units", "atomic", "true") not in figures


def test_expired_orders_hold_no_stock_and_an_overdue_pending_one_shows():
    """Units that went back and sold again are no oversell; a pending order past its
    window is the expirer's lag, which FlashsalePaymentsNotExpiring pages for."""
    from datetime import timedelta

    from django.utils import timezone

    from payments.expiry import orders_expire

    sale_reset(sku="w-5", stock=1, strategy="atomic", payment_window_s=60)
    order_create(sku="w-5", quantity=1, user_id="ann", idempotency_key=None)
    Order.objects.update(expires_at=timezone.now() - timedelta(seconds=120))  # its window ended 2 min ago
    figures = gauges()
    assert figures[("flashsale_pending_overdue_seconds", "atomic", "true")] >= 120
    assert figures[("flashsale_sale_orders", "atomic", "pending")] == 1
    orders_expire()
    order_create(sku="w-5", quantity=1, user_id="bob", idempotency_key=None)  # the unit, sold again
    figures = gauges()
    assert figures[("flashsale_sale_oversold_units", "atomic", "true")] == 0
    assert figures[("flashsale_pending_overdue_seconds", "atomic", "true")] == 0
    assert (figures[("flashsale_sale_orders", "atomic", "expired")],
            figures[("flashsale_sale_orders", "atomic", "pending")]) == (1, 1)
