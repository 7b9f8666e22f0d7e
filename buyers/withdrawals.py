"""Tokens withdrawn: a buyer deactivated or deleted has every token issued to it
until then refused, though each is signed and unexpired.

Without a database read on the purchase path: the withdrawals live in the shared
cache's Redis (a sorted set, username → when), and each process keeps a copy it
reads again at most every ``FLASHSALE_BUYER_WITHDRAWN_REFRESH_S`` (1 s), so a
withdrawn token is refused within that long on every instance, at the cost of one
read a second per process, not one per request. A withdrawal is kept as long as a
token issued before it can live (``FLASHSALE_BUYER_TOKEN_TTL_S``); then the
token's own expiry refuses it. A buyer made active again signs in for new tokens.
When Redis cannot be read, the last copy stands (logged): a purchase is not stopped
by the cache, and an hour's token is the most a withdrawn buyer keeps.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import cast

import redis
from django.conf import settings
from django_redis import get_redis_connection

from common.cache_errors import CACHE_ERRORS

logger = logging.getLogger(__name__)

KEY = "buyers:withdrawn"
# Past a token's lifetime, the clocks' differences (buyers.tokens.LEEWAY_S) and more.
MARGIN_S = 60

_lock = threading.Lock()
_copy: dict[str, float] = {}
_read_at = float("-inf")


def _redis() -> redis.Redis:
    client: redis.Redis = get_redis_connection("default")  # unannotated there
    return client


def buyer_withdraw(*, username: str, at: float | None = None) -> None:
    """Refuse every token issued to ``username`` up to now (``at``)."""
    now = time.time() if at is None else at
    kept_s = settings.FLASHSALE_BUYER_TOKEN_TTL_S + MARGIN_S
    pipe = _redis().pipeline(transaction=True)
    pipe.zadd(KEY, {username: now})
    pipe.zremrangebyscore(KEY, "-inf", now - kept_s)  # their tokens have expired by now
    pipe.execute()
    with _lock:
        _copy[username] = now  # this process refuses them at once


def withdrawn_at(username: str) -> float | None:
    """When ``username``'s tokens were withdrawn (those issued before are refused);
    None if they were not. A read of Redis at most once per refresh period."""
    global _copy, _read_at
    now = time.monotonic()
    if now - _read_at >= settings.FLASHSALE_BUYER_WITHDRAWN_REFRESH_S:
        with _lock:
            if now - _read_at >= settings.FLASHSALE_BUYER_WITHDRAWN_REFRESH_S:
                try:
                    since = time.time() - settings.FLASHSALE_BUYER_TOKEN_TTL_S - MARGIN_S
                    # The cache's client does not decode: names as bytes, with their scores.
                    read = cast(list[tuple[bytes, float]],
                                _redis().zrangebyscore(KEY, since, "+inf", withscores=True))
                    _copy = {name.decode(): at for name, at in read}
                except CACHE_ERRORS as e:
                    logger.warning("withdrawn buyers: Redis unreachable, the last copy stands: %s", e)
                _read_at = now
    return _copy.get(username)
