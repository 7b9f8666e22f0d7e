"""Admission tokens: what the waiting room gives a buyer it admits, and what a
purchase of a sale with a room needs.

A JWT (RFC 7519, PyJWT) signed with HMAC-SHA256 under a key of its own derived from
the project's ``SECRET_KEY``: its subject is the buyer, its audience the room's
admissions, and it names the sku and the room's sale; it expires with the admission.
The signature makes it unforgeable and binds it to one buyer and one sale without a
lookup; that it buys once is Redis's (``waitingroom.store.admission_spend``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jwt
from django.conf import settings
from django.utils.crypto import salted_hmac

ALGORITHM = "HS256"
AUDIENCE = "flashsale:admission"
LEEWAY_S = 5  # clocks of the instances that issue and check may differ by this much


class TokenRefused(Exception):
    """Not an admission this project issued, or it has expired."""


@dataclass(frozen=True)
class Admission:
    buyer: str
    sku: str
    sale: str
    expires_at: int  # epoch seconds


@functools.lru_cache(maxsize=4)
def _key(secret: str) -> bytes:
    return salted_hmac("flashsale.waitingroom.admission", "key", secret=secret, algorithm="sha256").digest()


def admission_token(*, buyer: str, sku: str, sale: str, expires_at: int) -> str:
    return jwt.encode({"sub": buyer, "aud": AUDIENCE, "sku": sku, "sale": sale, "exp": expires_at},
                      _key(settings.SECRET_KEY), algorithm=ALGORITHM)


def admission_read(token: str) -> Admission:
    """What a token admits.

    :raises TokenRefused: forged, altered, expired, or not an admission.
    """
    try:
        claims = jwt.decode(token, _key(settings.SECRET_KEY), algorithms=[ALGORITHM], audience=AUDIENCE,
                            leeway=LEEWAY_S, options={"require": ["sub", "aud", "sku", "sale", "exp"]})
    except jwt.PyJWTError as e:
        raise TokenRefused(str(e)) from e
    fields = (claims["sub"], claims["sku"], claims["sale"])
    if not all(isinstance(f, str) and f for f in fields):
        raise TokenRefused("the token names no buyer, sku or sale")
    return Admission(*fields, expires_at=claims["exp"])
