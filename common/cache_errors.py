"""What a cache call can raise when Redis is slow or gone. The purchase's Redis fast
paths (the idempotency flags, the sale's state) and the product's cached read catch
exactly this, and fall back to the database: an unreachable Redis costs work, never
a wrong answer. ``cache_read`` and ``cache_write`` are the cache's get and set that
say so instead of raising; ``cache_claimed`` and ``cache_awaited`` are the two halves
of one entry filled by one caller while the others wait for it."""

import logging
import time
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


def cache_claimed(key: str, timeout: float) -> bool:
    """Whether this caller is the one to fill the entry ``key``: the first in
    ``timeout`` (its flag's life, so a filler that died frees it). With Redis away,
    every caller is: nobody would be told the entry is there."""
    try:
        return cache.add(f"{key}:fill", 1, timeout=timeout)
    except CACHE_ERRORS:
        return True


def cache_awaited(key: str, *, wait_s: float, poll_s: float = 0.02) -> Any:
    """The entry another caller is filling, once it is written; None when it is not
    within ``wait_s`` or Redis stops answering (the caller fills it itself)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        time.sleep(poll_s)
        entry = cache_read(key)
        if entry is UNREADABLE:
            return None
        if entry is not None:
            return entry
    return None
