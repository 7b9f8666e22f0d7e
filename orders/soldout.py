"""The sold-out mark: once a product's stock reaches 0, a flag in Redis answers
later purchases with 409 sold_out before any lock or transaction. A flash sale
spends most of its requests after the stock is gone; this keeps them cheap.

The mark only saves work: without it (Redis down, setting off) the purchase
finds the stock empty the slow way and answers the same.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.cache import cache

from .cache_errors import CACHE_ERRORS

logger = logging.getLogger(__name__)


def _key(sku: str) -> str:
    return f"soldout:{sku}"


def soldout_marked(*, sku: str) -> bool:
    if not settings.FLASHSALE_SOLDOUT_FAST_PATH:
        return False
    try:
        return bool(cache.get(_key(sku)))
    except CACHE_ERRORS as e:
        logger.warning("sold-out mark unreadable, taking the slow path: %s", e)
        return False


def soldout_mark(*, sku: str) -> None:
    try:
        cache.set(_key(sku), 1, timeout=None)  # until the sale is reset
    except CACHE_ERRORS as e:
        logger.warning("could not set the sold-out mark for %s: %s", sku, e)


def soldout_clear(*, sku: str) -> None:
    try:
        cache.delete(_key(sku))
    except CACHE_ERRORS as e:
        logger.warning("could not clear the sold-out mark for %s: %s", sku, e)
