"""The live sales, watched for /metrics: what their products have left, whether any
sold more than it had, their orders by status and how overdue the oldest unpaid one
is, by strategy, read from the database when Prometheus scrapes an app instance
(``FLASHSALE_METRICS_COLLECTORS``).

A sale is live for an hour after its reset (``sale_watched``, called by the reset,
records it in Redis); the figures are summed over the live sales of each strategy,
never given by sku. Each process reads them at most every ``READ_EVERY`` seconds:
a scrape every 2 s from Prometheus must not become an audit every 2 s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from django.conf import settings
from django.db import connection
from django_redis import get_redis_connection
from prometheus_client.core import GaugeMetricFamily, Metric

from common.cache_errors import CACHE_ERRORS
from common.memory import ProcessMemory
from common.strategies import strategy_of
from inventory.models import Product, Stock

from .models import Order

LIVE = "sales:live"  # sorted set: sku -> when its sale was reset (epoch seconds)
LIVE_SECONDS = 3600
READ_EVERY = 10.0

logger = logging.getLogger(__name__)


def sale_watched(*, sku: str) -> None:
    """Watch ``sku``'s sale, reset now, for the next hour; a Redis that cannot be
    reached costs the figures, not the reset."""
    try:
        get_redis_connection("default").zadd(LIVE, {sku: time.time()})
    except CACHE_ERRORS as e:
        logger.warning("the sale of %s is not watched for /metrics: %s", sku, e)


@dataclass
class Figures:
    """One strategy's live sales, summed."""

    sales: int = 0
    stock_left: int = 0
    oversold: int = 0  # units the orders that hold stock hold past it
    orders: dict[str, int] = field(default_factory=dict)  # by status (placed, pending, paid, ...)
    # How long the most overdue pending order is past its window (0: none is):
    # the expirer's lag, or the expirer stuck.
    overdue_s: float = 0.0


# strategy -> its figures, read at most every READ_EVERY s.
_read: ProcessMemory[str, dict[str, Figures]] = ProcessMemory(
    "the live sales' figures", seconds=lambda: READ_EVERY)

# Per product over the live ones: its own strategy, its stock left and first stock.
_STOCK = """
    SELECT p.id, p.strategy, SUM(s.quantity), SUM(s.initial_quantity)
    FROM {products} p JOIN {stock} s ON s.product_id = p.id
    WHERE p.sku IN ({skus}) GROUP BY p.id, p.strategy"""

# Their orders by status: how many, their units, the strategy they were sold under
# (a product without one of its own sells under the deployment's of the moment), and
# the earliest window's end (of the pending ones: the most overdue).
_ORDERS = """
    SELECT o.product_id, o.status, COUNT(*), SUM(o.quantity), MAX(o.strategy), MIN(o.expires_at)
    FROM {orders} o JOIN {products} p ON p.id = o.product_id
    WHERE p.sku IN ({skus}) GROUP BY o.product_id, o.status"""


def live_figures() -> dict[str, Figures]:
    """strategy -> its figures, over the sales reset in the last hour.

    :raises DatabaseError, redis errors: a server cannot be reached.
    """
    client = get_redis_connection("default")
    now = time.time()
    client.zremrangebyscore(LIVE, "-inf", now - LIVE_SECONDS)
    skus = [sku.decode() for sku in client.zrangebyscore(LIVE, now - LIVE_SECONDS, "+inf")]
    if not skus:
        return {}
    names = dict(products=Product._meta.db_table, stock=Stock._meta.db_table, orders=Order._meta.db_table,
                 skus=", ".join(["%s"] * len(skus)))
    with connection.cursor() as cursor:
        cursor.execute(_STOCK.format(**names), skus)
        stock = cursor.fetchall()
        cursor.execute(_ORDERS.format(**names), skus)
        orders = cursor.fetchall()
    by_product: dict[int, list[list[Any]]] = {}
    for product_id, *row in orders:
        by_product.setdefault(product_id, []).append(row)
    figures: dict[str, Figures] = {}
    for product_id, own, left, first in stock:
        rows = by_product.get(product_id, [])
        sold_under = max((row[3] for row in rows), default="")
        name = strategy_of(own or sold_under or settings.FLASHSALE_STRATEGY).name
        figure = figures.setdefault(name, Figures())
        held = 0
        for status, count, units, _, earliest in rows:
            figure.orders[status] = figure.orders.get(status, 0) + count
            if status in Order.HOLDING_STOCK:
                held += int(units)
            if status == Order.Status.PENDING and earliest is not None:
                overdue = now - earliest.replace(tzinfo=UTC).timestamp()
                figure.overdue_s = max(figure.overdue_s, overdue)
        figure.sales += 1
        figure.stock_left += int(left)
        figure.oversold += max(0, held - int(first))
    return figures


class SaleWatchCollector:
    """The live sales' gauges, by strategy; none while the database or Redis cannot
    be reached (``flashsale_collector_up{collector="sales"}`` says so)."""

    name = "sales"

    def collect(self) -> Iterator[Metric]:
        figures = _read.get("all")
        if figures is None:
            figures = live_figures()
            _read.put("all", figures)
        gauges = {
            "flashsale_sales_live": "Sales reset in the last hour, by strategy",
            "flashsale_sale_stock_left": "Units the live sales' stock rows have left, by strategy (the "
                                         "gate's are written by its persisters: flashsale_gate_stock_left "
                                         "is its Redis's own)",
            "flashsale_sale_oversold_units": "Units the live sales' orders that hold stock hold past it, by "
                                             "strategy; claims_correct: whether the strategy promises none",
            "flashsale_pending_overdue_seconds": "How long the live sales' most overdue pending order is "
                                                 "past its payment window (0: none is), by strategy",
        }
        families = {name: GaugeMetricFamily(name, text, labels=["strategy", "claims_correct"])
                    for name, text in gauges.items()}
        by_status = GaugeMetricFamily("flashsale_sale_orders", "The live sales' orders, by strategy and "
                                      "status (placed: no payment step; pending, paid, expired, refunded)",
                                      labels=["strategy", "status"])
        for strategy, figure in sorted(figures.items()):
            labels = [strategy, "true" if strategy_of(strategy).claims_correct else "false"]
            values = (figure.sales, figure.stock_left, figure.oversold, max(0.0, figure.overdue_s))
            for family, value in zip(families.values(), values, strict=True):
                family.add_metric(labels, value)
            for status, n in sorted(figure.orders.items()):
                by_status.add_metric([strategy, status], n)
        yield from families.values()
        yield by_status
