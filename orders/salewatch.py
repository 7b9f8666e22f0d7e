"""The live sales, watched for /metrics: what their products have left and whether any
sold more than it had, by strategy, read from the database when Prometheus scrapes an
app instance (``FLASHSALE_METRICS_COLLECTORS``).

A sale is live for an hour after its reset (``sale_watched``, called by the reset,
records it in Redis); the figures are summed over the live sales of each strategy,
never given by sku. Each process reads them at most every ``READ_EVERY`` seconds:
a scrape every 2 s from Prometheus must not become an audit every 2 s.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import DatabaseError, connection
from django_redis import get_redis_connection
from prometheus_client.core import GaugeMetricFamily

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


# strategy -> (live sales, stock left, units sold past the stock), read at most every READ_EVERY s.
_read: ProcessMemory[str, dict[str, tuple[int, int, int]]] = ProcessMemory(
    "the live sales' figures", seconds=lambda: READ_EVERY)

# Per product over the live ones: its own strategy, the one its orders were sold under
# (a product without one of its own sells under the deployment's of the moment), its
# stock left and first stock, and the units its orders hold.
_FIGURES = """
    SELECT p.id, p.strategy, o.sold_under, s.left_, s.first_, COALESCE(o.units, 0)
    FROM {products} p
    JOIN (SELECT product_id, SUM(quantity) AS left_, SUM(initial_quantity) AS first_
          FROM {stock} GROUP BY product_id) s ON s.product_id = p.id
    LEFT JOIN (SELECT product_id, SUM(quantity) AS units, MAX(strategy) AS sold_under FROM {orders}
               WHERE product_id IN (SELECT id FROM {products} WHERE sku IN ({skus}))
               GROUP BY product_id) o ON o.product_id = p.id
    WHERE p.sku IN ({skus})"""


def live_figures() -> dict[str, tuple[int, int, int]]:
    """strategy -> (live sales, units left, units sold past the stock), over the sales
    reset in the last hour.

    :raises DatabaseError, redis errors: a server cannot be reached.
    """
    client = get_redis_connection("default")
    now = time.time()
    client.zremrangebyscore(LIVE, "-inf", now - LIVE_SECONDS)
    skus = [sku.decode() for sku in client.zrangebyscore(LIVE, now - LIVE_SECONDS, "+inf")]
    figures: dict[str, tuple[int, int, int]] = {}
    if not skus:
        return figures
    marks = ", ".join(["%s"] * len(skus))
    query = _FIGURES.format(products=Product._meta.db_table, stock=Stock._meta.db_table,
                            orders=Order._meta.db_table, skus=marks)
    with connection.cursor() as cursor:
        cursor.execute(query, [*skus, *skus])
        rows = cursor.fetchall()
    for _, own, sold_under, left, first, units in rows:
        name = strategy_of(own or sold_under or settings.FLASHSALE_STRATEGY).name
        sales, stock_left, oversold = figures.get(name, (0, 0, 0))
        figures[name] = (sales + 1, stock_left + int(left), oversold + max(0, int(units) - int(first)))
    return figures


class SaleWatchCollector:
    """The live sales' gauges, by strategy; none while the database or Redis cannot
    be reached."""

    def collect(self):
        figures = _read.get("all")
        if figures is None:
            try:
                figures = live_figures()
            except (DatabaseError, *CACHE_ERRORS) as e:
                logger.warning("the live sales were not read for /metrics: %s", e)
                return
            _read.put("all", figures)
        gauges = {
            "flashsale_sales_live": "Sales reset in the last hour, by strategy",
            "flashsale_sale_stock_left": "Units the live sales' stock rows have left, by strategy (the "
                                         "gate's are written by its persisters: flashsale_gate_stock_left "
                                         "is its Redis's own)",
            "flashsale_sale_oversold_units": "Units the live sales' orders hold past their stock, by "
                                             "strategy; claims_correct: whether the strategy promises none",
        }
        families = {name: GaugeMetricFamily(name, text, labels=["strategy", "claims_correct"])
                    for name, text in gauges.items()}
        for strategy, values in sorted(figures.items()):
            labels = [strategy, "true" if strategy_of(strategy).claims_correct else "false"]
            for family, value in zip(families.values(), values, strict=True):
                family.add_metric(labels, value)
        yield from families.values()
