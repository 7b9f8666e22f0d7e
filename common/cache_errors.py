"""What a cache call can raise when Redis is slow or gone. The purchase's Redis fast
paths (the idempotency flags, the sale's state) and the product's cached read catch
exactly this, and fall back to the database: an unreachable Redis costs work, never
a wrong answer. ``cache_read`` and ``cache_write`` are the cache's get and set that
say so instead of raising."""

import logging
from typing import Any

from django.core.cache import cache
from django_redis.exceptions import ConnectionInterrupted
from redis.exceptions import RedisError

CACHE_ERRORS = (ConnectionInterrupted, RedisError, OSError)

logger = logging.getLogger(__name__)

UNREADABLE = object()


def cache_read(key: str) -> Any:
    """The entry, None when there is none, ``UNREADABLE`` when Redis cannot answer
    (the caller loads the value instead)."""
    try:
        return cache.get(key)
    except CACHE_ERRORS as e:
        logger.warning("cache unreadable, loading %s: %s", key, e)
        return UNREADABLE


def cache_write(key: str, value: Any, timeout: float) -> None:
    """Write the entry if Redis takes it; if not, the next reader loads again."""
    try:
        cache.set(key, value, timeout=timeout)
    except CACHE_ERRORS as e:
        logger.warning("could not cache %s: %s", key, e)
