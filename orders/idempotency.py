"""The Redis fast path of idempotency: one flag per Idempotency-Key.

A request claims its key with SET NX (Django's ``cache.add``) before doing any
work; a retry that finds the flag is answered without taking the lock. The flag
only saves work: the unique key on ``Order`` is what guarantees one order per key,
so when Redis is unreachable purchases go on without the fast path.

A claim does not expire: one whose request should have finished long ago is stale
(``Flag.stale``), and the retry that finds it lets the database decide. A completed
order's flag that Redis refused (it was unreachable at that moment) is *owed*: this
process writes it before its next claim and, until then, does not let the sale's
mark vouch for the flags (``orders.salemark``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from flashsale.cache_errors import CACHE_ERRORS

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Flag:
    fingerprint: str
    order_id: int | None  # None while the request that claimed the key is in flight
    since: float | None = None  # when a claim was made (epoch seconds)

    @property
    def stale(self) -> bool:
        """A claim whose request would have finished by now, had it lived: its
        instance died (or lost Redis) between its work and its answer. The claim is
        not dropped by a TTL, so that a key whose order committed just before its
        instance died is never taken for a key without one: the database decides."""
        return (self.order_id is None and self.since is not None
                and time.time() - self.since > settings.FLASHSALE_IDEMPOTENCY_PENDING_TTL)


def request_fingerprint(*, sku: str, quantity: int, user_id: str) -> str:
    """What a key's requests must agree on: a key reused with another body conflicts."""
    return hashlib.sha256(f"{sku}\0{quantity}\0{user_id}".encode()).hexdigest()


def _cache_key(key: str) -> str:
    return f"idem:{key}"


# Flags of completed orders that Redis refused, by cache key; written before the next claim.
_owed: dict[str, dict] = {}
_owed_mutex = threading.Lock()


def _claim(fingerprint: str) -> dict:
    """A claim of a key by a request starting now (its flag while it is in flight)."""
    return {"fingerprint": fingerprint, "order_id": None, "since": time.time()}


def flags_owed() -> bool:
    """Whether this process owes Redis a completed order's flag."""
    return bool(_owed)


def _pay_owed() -> None:
    with _owed_mutex:
        owed = dict(_owed)
    try:
        cache.set_many(owed, timeout=settings.FLASHSALE_IDEMPOTENCY_TTL)
    except CACHE_ERRORS:
        return  # still unreachable: owed a while longer
    with _owed_mutex:
        for cache_key in owed:
            _owed.pop(cache_key, None)
    logger.info("wrote %d owed idempotency flags", len(owed))


def flag_claim(*, key: str, fingerprint: str) -> Flag | None:
    """Claim ``key`` for this request.

    :returns: ``None`` if this request now owns the key (or Redis is down), else
        the flag another request left.
    """
    if _owed:
        _pay_owed()
    pending = _claim(fingerprint)
    try:
        for _ in range(2):  # the other flag may expire between ADD and GET
            if cache.add(_cache_key(key), pending, timeout=settings.FLASHSALE_IDEMPOTENCY_TTL):
                return None
            existing = cache.get(_cache_key(key))
            if existing is not None:
                return Flag(**existing)
    except CACHE_ERRORS as e:
        logger.warning("idempotency fast path unavailable, relying on the database: %s", e)
    return None


def flag_take_over(*, key: str, fingerprint: str) -> None:
    """Claim ``key`` in place of a stale claim (the database said it has no order)."""
    try:
        cache.set(_cache_key(key), _claim(fingerprint), timeout=settings.FLASHSALE_IDEMPOTENCY_TTL)
    except CACHE_ERRORS as e:
        logger.warning("could not take over the claim of %s: %s", key, e)


def flag_complete(*, key: str, fingerprint: str, order_id: int) -> None:
    """Record that ``key`` has an order (or, after a commit whose outcome is unknown,
    may have one: a retry that finds this flag asks the database)."""
    flag = {"fingerprint": fingerprint, "order_id": order_id}
    try:
        cache.set(_cache_key(key), flag, timeout=settings.FLASHSALE_IDEMPOTENCY_TTL)
    except CACHE_ERRORS as e:
        logger.warning("could not record idempotency flag for %s, owed until Redis answers: %s", key, e)
        with _owed_mutex:
            _owed[_cache_key(key)] = flag


def flag_unsettled(*, key: str, fingerprint: str) -> None:
    """Record that ``key``'s request ended without knowing whether its order committed,
    nor its id: a claim stale at once, so the next request with the key asks the
    database (``Flag.stale``) instead of waiting for this one."""
    try:
        cache.set(_cache_key(key), {**_claim(fingerprint), "since": 0.0},
                  timeout=settings.FLASHSALE_IDEMPOTENCY_TTL)
    except CACHE_ERRORS as e:
        # The claim stays as it was: stale once its pending TTL is out.
        logger.warning("could not mark the outcome of %s unknown: %s", key, e)


def flags_forget(*, keys: list[str]) -> None:
    """Drop flags: the request failed (so a retry may try again) or its order was reset."""
    if not keys:
        return
    try:
        cache.delete_many([_cache_key(k) for k in keys])
    except CACHE_ERRORS as e:
        logger.warning("could not drop idempotency flags: %s", e)
