"""The product page's read, from the shared cache (django-redis) instead of MySQL.

Before a sale opens, reads outnumber purchases by orders of magnitude, and every
one of them used to be a query. Here the answer is kept in Redis with a **logical
expiry** (``inventory.readcache.LogicalExpiry``): the entry carries the moment it
stops being fresh (``FLASHSALE_PRODUCT_FRESH_MS``, 500 ms), and lives much longer
than that. A reader that finds it stale still answers with it, and one reader at a
time (the one whose ``SET NX`` of the fill flag succeeds) reads the row again and
writes it back. So the stock figure is at most the freshness plus one rebuild
behind the database, a
hot product costs one query per freshness period across all instances, and nobody
waits for a rebuild (scenario S19 shows the breakdown this avoids).

In front of Redis, each process keeps what it read for
``FLASHSALE_PRODUCT_LOCAL_MS`` (100 ms): under a crowd most reads then cost no
round trip at all. When the copy's period is over, one thread reads Redis while the
others answer with the copy, so the figure is at most two periods older again
(700 ms in all by default, inside the 1 s the page promises).

The reset writes the entry afresh (``product_cached_refresh``), so a new sale's
stock and window show at once in Redis, and in every process within its local
period. A Redis that is slow or gone costs queries, never the page: the read falls
back to the database, one query a freshness period per process.
"""

from __future__ import annotations

from django.conf import settings

from common.memory import ProcessMemory

from .readcache import LogicalExpiry
from .selectors import ProductStock, product_stock_get

_shared = LogicalExpiry(load=lambda sku: product_stock_get(sku=sku), key=lambda sku: f"product:{sku}",
                        fresh_s=lambda: settings.FLASHSALE_PRODUCT_FRESH_MS / 1000)


def product_cached_get(*, sku: str) -> ProductStock:
    """The product and its stock, at most twice ``FLASHSALE_PRODUCT_LOCAL_MS`` plus
    ``FLASHSALE_PRODUCT_FRESH_MS`` plus one rebuild behind the database.

    :raises NotFound: no such product (not cached: the next reader asks again).
    """
    local = _local.get(sku)
    if local is not None:
        return local
    if (last := _local.last(sku)) is not None:
        # Past its period: this thread reads Redis; the process's other threads
        # answer with the copy meanwhile, instead of all reading Redis at once.
        _local.put(sku, last)
    product = _shared.get(sku)
    _local.put(sku, product)
    return product


# sku -> the product and its stock, for FLASHSALE_PRODUCT_LOCAL_MS: only products
# that exist get here.
_local: ProcessMemory[str, ProductStock] = ProcessMemory(
    "each product and its stock", seconds=lambda: settings.FLASHSALE_PRODUCT_LOCAL_MS / 1000)


def product_read(*, sku: str, fresh: bool) -> ProductStock:
    """The product page's read: from the caches, or (``fresh``) from the database,
    when a cache in front (nginx's) is filling its own entry."""
    return product_stock_get(sku=sku) if fresh else product_cached_get(sku=sku)


def product_cached_refresh(*, sku: str) -> None:
    """After a reset: the entry is written afresh from the new row, so the next
    readers neither see the old sale nor all miss at once."""
    _local.pop(sku)
    _shared.refresh(sku)
