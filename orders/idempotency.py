"""The Redis fast path of idempotency: one flag per Idempotency-Key.

A request claims its key with SET NX (Django's ``cache.add``) before doing any
work; a retry that finds the flag is answered without taking the lock. The flag
only saves work: the unique key on ``Order`` is what guarantees one order per key,
so when Redis is unreachable purchases go on without the fast path.

A claim does not expire: one whose request should have finished long ago is stale
(``Flag.stale``), and the retry that finds it lets the database decide. A completed
order's flag that Redis refused (it was unreachable at that moment) is *owed*: this
process writes it before its next claim and, until then, does not let the sale's
state vouch for the flags (``orders.salestate``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from prometheus_client import Counter

from common.cache_errors import CACHE_ERRORS
from common.errors import ApplicationError, Busy, IdempotencyConflict
from common.metrics import count
from inventory.selectors import flows_remaining

from .models import Order
from .results import OrderResult

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
                and time.time() - self.since > settings.FLASHSALE_IDEMPOTENCY_PENDING_TTL_S)


def request_fingerprint(*, sku: str, quantity: int, user_id: str) -> str:
    """What a key's requests must agree on: a key reused with another body conflicts."""
    return hashlib.sha256(f"{sku}\0{quantity}\0{user_id}".encode()).hexdigest()


def _cache_key(key: str) -> str:
    return f"idem:{key}"


# Flags of completed orders that Redis refused, by cache key; written before the next claim.
_unwritten: dict[str, dict[str, Any]] = {}
_unwritten_mutex = threading.Lock()

# What the flags' fast path went through (a replay is the purchase's own answer:
# flashsale_purchases_total{code="replayed"}).
EVENTS = Counter(
    "flashsale_idempotency_events",
    "The idempotency flags' events: stale_claim_taken_over (a claim whose request should "
    "have ended, the database holding no order: a retry took it), flags_unreachable (Redis "
    "did not answer a claim: the database decides), flag_owed (a completed order's flag "
    "Redis refused, kept to write later), owed_flags_written",
    ["event"],
)


def _claim(fingerprint: str) -> dict[str, Any]:
    """A claim of a key by a request starting now (its flag while it is in flight)."""
    return {"fingerprint": fingerprint, "order_id": None, "since": time.time()}


def flags_unwritten() -> bool:
    """Whether this process owes Redis a completed order's flag."""
    return bool(_unwritten)


def _write_unwritten() -> None:
    with _unwritten_mutex:
        owed = dict(_unwritten)
    try:
        cache.set_many(owed, timeout=settings.FLASHSALE_IDEMPOTENCY_TTL_S)
    except CACHE_ERRORS:
        return  # still unreachable: owed a while longer
    with _unwritten_mutex:
        for cache_key in owed:
            _unwritten.pop(cache_key, None)
    logger.info("wrote %d owed idempotency flags", len(owed))
    count(EVENTS, "owed_flags_written", amount=len(owed))


def flag_claim(*, key: str, fingerprint: str) -> Flag | None:
    """Claim ``key`` for this request.

    :returns: ``None`` if this request now owns the key (or Redis is down), else
        the flag another request left.
    """
    if _unwritten:
        _write_unwritten()
    pending = _claim(fingerprint)
    try:
        for _ in range(2):  # the other flag may expire between ADD and GET
            if cache.add(_cache_key(key), pending, timeout=settings.FLASHSALE_IDEMPOTENCY_TTL_S):
                return None
            existing = cache.get(_cache_key(key))
            if existing is not None:
                return Flag(**existing)
    except CACHE_ERRORS as e:
        logger.warning("idempotency fast path unavailable, relying on the database: %s", e)
        count(EVENTS, "flags_unreachable")
    return None


def flag_take_over(*, key: str, fingerprint: str) -> None:
    """Claim ``key`` in place of a stale claim (the database said it has no order)."""
    count(EVENTS, "stale_claim_taken_over")
    try:
        cache.set(_cache_key(key), _claim(fingerprint), timeout=settings.FLASHSALE_IDEMPOTENCY_TTL_S)
    except CACHE_ERRORS as e:
        logger.warning("could not take over the claim of %s: %s", key, e)


def flag_complete(*, key: str, fingerprint: str, order_id: int) -> None:
    """Record that ``key`` has an order (or, after a commit whose outcome is unknown,
    may have one: a retry that finds this flag asks the database)."""
    flag = {"fingerprint": fingerprint, "order_id": order_id}
    try:
        cache.set(_cache_key(key), flag, timeout=settings.FLASHSALE_IDEMPOTENCY_TTL_S)
    except CACHE_ERRORS as e:
        logger.warning("could not record idempotency flag for %s, owed until Redis answers: %s", key, e)
        count(EVENTS, "flag_owed")
        with _unwritten_mutex:
            _unwritten[_cache_key(key)] = flag


def flag_unsettled(*, key: str, fingerprint: str) -> None:
    """Record that ``key``'s request ended without knowing whether its order committed,
    nor its id: a claim stale at once, so the next request with the key asks the
    database (``Flag.stale``) instead of waiting for this one."""
    try:
        cache.set(_cache_key(key), {**_claim(fingerprint), "since": 0.0},
                  timeout=settings.FLASHSALE_IDEMPOTENCY_TTL_S)
    except CACHE_ERRORS as e:
        # The claim stays as it was: stale once its pending TTL is out.
        logger.warning("could not state the outcome of %s unknown: %s", key, e)


def flags_forget(*, keys: list[str]) -> None:
    """Drop flags: the request failed (so a retry may try again) or its order was reset."""
    if not keys:
        return
    try:
        cache.delete_many([_cache_key(k) for k in keys])
    except CACHE_ERRORS as e:
        logger.warning("could not drop idempotency flags: %s", e)


# --- answering a key's request from the outcome it already has ---------------------------


def _replay(*, order: Order, fingerprint: str) -> OrderResult:
    if request_fingerprint(sku=order.product.sku, quantity=order.quantity,
                           user_id=order.user_id) != fingerprint:
        raise IdempotencyConflict(
            "this Idempotency-Key was used with a different request",
            extra={"order_id": order.pk},
        )
    return OrderResult.of(order, remaining=flows_remaining(operation_flag=order.idempotency_key),
                          replayed=True)


def _order_by_key(key: str) -> Order | None:
    return Order.objects.select_related("product").filter(idempotency_key=key).first()


def replay_by_key(*, key: str, fingerprint: str) -> OrderResult | None:
    """The database's answer for ``key``: its order's, if it has one. The flag Redis
    lost is written again, with the original request's fingerprint."""
    existing = _order_by_key(key)
    if existing is None:
        return None
    original = request_fingerprint(sku=existing.product.sku, quantity=existing.quantity,
                                   user_id=existing.user_id)
    flag_complete(key=key, fingerprint=original, order_id=existing.pk)
    return _replay(order=existing, fingerprint=fingerprint)


# How often a retry waiting for its key's first request looks again.
INFLIGHT_POLL_SECONDS = 0.05


def key_claimed_or_replay(*, key: str, fingerprint: str) -> OrderResult | None:
    """Claim the key; if an earlier request holds it, answer as that request did.

    A retry that arrives while the first request is still in flight waits for it, a
    short and bounded time (``FLASHSALE_INFLIGHT_WAIT_S``), and answers its outcome: a
    client that retried on a timeout gets its order, not a 503 to retry again.

    :returns: the original order's result for a replay, ``None`` when this
        request owns the key and should go ahead.
    """
    deadline = time.monotonic() + settings.FLASHSALE_INFLIGHT_WAIT_S
    while True:
        flag = flag_claim(key=key, fingerprint=fingerprint)
        if flag is None:
            return None
        if flag.fingerprint != fingerprint:
            raise IdempotencyConflict("this Idempotency-Key was used with a different request")
        order = _order_by_key(key)
        if order is not None:
            return _replay(order=order, fingerprint=fingerprint)
        if flag.stale and flag.order_id is None:
            # Its request died without an answer, and the database says it left no
            # order (it cannot commit now: past its deadline): this request goes on.
            flag_take_over(key=key, fingerprint=fingerprint)
            return None
        # Every way round the loop passes here: bounded by the wait, whatever the
        # flags do meanwhile.
        if time.monotonic() >= deadline:
            raise Busy("a request with this Idempotency-Key is still in progress")
        if flag.order_id is not None:
            # The flag outlived its order (the sale was reset, or a commit whose
            # outcome was unknown did not land): the key is free again, at once.
            flags_forget(keys=[key])
        else:
            time.sleep(INFLIGHT_POLL_SECONDS)  # the first request is in flight: wait for its outcome


def key_freed_or_replay(error: BaseException, *, key: str, fingerprint: str, flags_complete: bool,
                        deadline: float) -> OrderResult | None:
    """Before a keyed request is refused, make sure its key has no order: the
    database is the truth for idempotency. The flags answer for it (no look-up) only
    while the sale's state vouches that no flag was lost (``flags_complete``); then
    this request's fresh claim means the key has none. Returns the order's replay if it has one; else the
    key is freed, so a retry may try again."""
    known = None
    if isinstance(error, ApplicationError) and not flags_complete:
        try:
            known = replay_by_key(key=key, fingerprint=fingerprint)
        except IdempotencyConflict:
            raise  # the key has an order, and its flag again
        except BaseException:
            key_free(key, deadline)
            raise
    if known is None:
        key_free(key, deadline)
    return known


def key_free(key: str, deadline: float) -> None:
    """Drop this request's claim of ``key``, if it is still this request's: past the
    deadline, the claim may have gone stale and been taken over by a retry (whose
    order's flag it now is), so it is left to go stale instead."""
    if time.monotonic() < deadline:
        flags_forget(keys=[key])
