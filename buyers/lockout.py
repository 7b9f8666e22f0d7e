"""Sign-in lockout: wrong passwords counted per username and per client (an IPv4
address or an IPv6 /64, ``common.throttles.bucket``) in the shared cache, so every
instance counts the same. Past its free failures each further one locks that
username, or that client, out for twice as long as the last, from a second up to
``FLASHSALE_SIGN_IN_LOCKOUT_MAX_S``. A locked-out try is answered 429 with
Retry-After before its password is hashed: a guess costs the server no PBKDF2 (the
sale's workers hash them) and teaches the guesser nothing.

Every door that signs in asks it: the API's token, the shop's sign-in form and the
admin's login; and the sign-up's "username taken", which would otherwise find names
(staff's first) without a limit, counts as a failure of its client.

A username's failures are forgotten when it signs in; a client's only
``FLASHSALE_SIGN_IN_FORGET_S`` after its last failure (a guesser that also holds an
account could otherwise clear them). Locking a username out lets anyone keep its
owner out, at the cost of a growing wait between their own tries: the trade every
per-account lockout makes, bounded here by the ceiling. Tries that pass the check at
once are counted after it, so concurrent guesses pass it as many at a time as the
sale has workers. When Redis cannot be reached, sign-in passes (logged): an operator
must reach the admin in an outage.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.core.cache import cache

from common.cache_errors import CACHE_ERRORS
from common.errors import SignInLocked

logger = logging.getLogger(__name__)

FIRST_LOCKOUT_S = 1


def _subjects(client: str | None, username: str | None) -> Iterator[tuple[str, int]]:
    """The cache key of each subject a try counts against, and its free failures (a
    setting of 0: not counted)."""
    if client is not None and settings.FLASHSALE_SIGN_IN_FREE_PER_CLIENT > 0:
        yield f"sign-in:client:{client}", settings.FLASHSALE_SIGN_IN_FREE_PER_CLIENT
    if username is not None and settings.FLASHSALE_SIGN_IN_FREE_PER_USERNAME > 0:
        # A username is whatever the client sent: hashed, a key of bounded length.
        digest = hashlib.sha256(username.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        yield f"sign-in:username:{digest}", settings.FLASHSALE_SIGN_IN_FREE_PER_USERNAME


def sign_in_check(*, client: str | None, username: str | None = None) -> None:
    """Refuses a try while its client or its username is locked out.

    :raises SignInLocked: with the seconds left of the longer lockout.
    """
    keys = [f"{key}:until" for key, _ in _subjects(client, username)]
    try:
        until = cache.get_many(keys)
    except CACHE_ERRORS as e:
        logger.warning("sign-in lockout: Redis unreachable, not checked: %s", e)
        return
    left = max(until.values(), default=0) - time.time()
    if left > 0:
        raise SignInLocked("too many failed sign-ins from this client or for this username",
                           retry_after=math.ceil(left))


def sign_in_failed(*, client: str | None, username: str | None = None) -> None:
    """Counts a failed try against its client and its username, and locks out each
    that has used its free failures: 1 s after the first past them, doubling."""
    forget_s = settings.FLASHSALE_SIGN_IN_FORGET_S
    try:
        for key, free in _subjects(client, username):
            cache.add(key, 0, timeout=forget_s)
            failures = cache.incr(key)
            cache.touch(key, timeout=forget_s)
            beyond = failures - free
            if beyond > 0:
                lockout_s = min(FIRST_LOCKOUT_S * 2 ** min(beyond - 1, 32),
                                settings.FLASHSALE_SIGN_IN_LOCKOUT_MAX_S)
                cache.set(f"{key}:until", time.time() + lockout_s, timeout=math.ceil(lockout_s) + 1)
                logger.warning("sign-in locked out for %s s after %d failures (%s)", lockout_s, failures,
                               key.split(":")[1])
    except CACHE_ERRORS as e:
        logger.warning("sign-in lockout: Redis unreachable, failure not counted: %s", e)


def sign_in_succeeded(*, username: str) -> None:
    """Forgets the username's failures (its client's stay)."""
    try:
        cache.delete_many([k for key, _ in _subjects(None, username) for k in (key, f"{key}:until")])
    except CACHE_ERRORS as e:
        logger.warning("sign-in lockout: Redis unreachable, failures not forgotten: %s", e)


@contextmanager
def sign_in_attempt(*, client: str | None, username: str,
                    refused: type[Exception] | tuple[type[Exception], ...]) -> Iterator[None]:
    """One try at a door: refused at once while locked out (``sign_in_check``); a
    ``refused`` raised inside counts as a failure; leaving without one forgets the
    username's failures."""
    sign_in_check(client=client, username=username)
    try:
        yield
    except refused:
        sign_in_failed(client=client, username=username)
        raise
    sign_in_succeeded(username=username)
