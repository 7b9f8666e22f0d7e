"""Buyers' bearer tokens: signed and expiring, so that the purchase path knows who
buys without a database read.

A token is a JWT (RFC 7519, PyJWT) signed with HMAC-SHA256 under a key derived from
the project's ``SECRET_KEY`` (or ``FLASHSALE_BUYER_TOKEN_KEY``): its subject is the
buyer's username, its audience this project's buyers, and it expires
``FLASHSALE_BUYER_TOKEN_TTL_S`` seconds after it was issued. A signed token cannot be
withdrawn one by one before it expires, which is why it lives an hour, not a month:
a buyer signs in again for the next. A buyer deactivated or deleted has all its
tokens issued until then refused (``buyers.withdrawals``), still without a database
read. Why not DRF SimpleJWT: its access tokens are the same
JWT, checked the same way, but its refresh tokens, blacklist and views are more than
a sale needs, and the purchase's shortcut (``orders.wsgi``) checks a token before
DRF runs at all.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import jwt
from django.conf import settings
from django.utils.crypto import salted_hmac

from .withdrawals import withdrawn_at

ALGORITHM = "HS256"
AUDIENCE = "flashsale:buyer"
LEEWAY_S = 5  # clocks of the instances that issue and check may differ by this much


class TokenRefused(Exception):
    """The token is not one this project issued to a buyer, or it has expired."""


@dataclass(frozen=True)
class Issued:
    token: str
    expires_at: int  # epoch seconds


def _key() -> bytes:
    return _derived(settings.FLASHSALE_BUYER_TOKEN_KEY, settings.SECRET_KEY)


@functools.lru_cache(maxsize=4)
def _derived(explicit: str, secret: str) -> bytes:
    """The signing key, made once per key and secret (a purchase checks a token)."""
    if explicit:
        return explicit.encode()
    # A key of its own, derived from SECRET_KEY: a token is no session cookie and no
    # password reset link, whatever else SECRET_KEY signs.
    return salted_hmac("flashsale.buyers.tokens", "key", secret=secret, algorithm="sha256").digest()


def token_issue(*, username: str, seconds: int | None = None, now: float | None = None) -> Issued:
    """A token naming ``username``, valid for ``seconds`` (``FLASHSALE_BUYER_TOKEN_TTL_S``)."""
    issued = int(time.time() if now is None else now)
    expires = issued + (settings.FLASHSALE_BUYER_TOKEN_TTL_S if seconds is None else seconds)
    token = jwt.encode({"sub": username, "aud": AUDIENCE, "iat": issued, "exp": expires}, _key(),
                       algorithm=ALGORITHM)
    return Issued(token, expires)


def token_buyer(token: str) -> str:
    """The buyer a token names.

    :raises TokenRefused: forged, altered, expired, or not a buyer's.
    """
    buyer, issued, expires = _verified(token, _key())
    if time.time() >= expires + LEEWAY_S:
        raise TokenRefused("Signature has expired")
    withdrawn = withdrawn_at(buyer)
    if withdrawn is not None and issued <= withdrawn:
        raise TokenRefused("the buyer's tokens were withdrawn (deactivated or deleted)")
    return buyer


# A buyer sends its token with every request (a retry, a second purchase, its orders):
# the signature is checked once a process, and each later request only its expiry.
# Only a token whose signature and claims held is kept; a refused one is checked anew.
@functools.lru_cache(maxsize=20_000)
def _verified(token: str, key: bytes) -> tuple[str, int, int]:
    try:
        claims = jwt.decode(token, key, algorithms=[ALGORITHM], audience=AUDIENCE, leeway=LEEWAY_S,
                            options={"require": ["sub", "aud", "iat", "exp"]})
    except jwt.PyJWTError as e:
        raise TokenRefused(str(e)) from e
    buyer = claims["sub"]
    if not isinstance(buyer, str) or not buyer:
        raise TokenRefused("the token names no buyer")
    return buyer, claims["iat"], claims["exp"]
