"""Admission tokens: what the waiting room gives a buyer it admits, and what a
purchase of a sale with a room needs.

Signed with itsdangerous' ``Signer`` (HMAC-SHA256, under a key of its own derived
from the project's ``SECRET_KEY`` with a salt, so that it passes for no other of the
project's signatures): a JSON list of the buyer, the sku, the room's sale and the
admission's end, base64url-encoded (a header's value), then its signature. The
signature makes it unforgeable and binds it to one buyer and one sale without a
lookup; that it buys once is Redis's (``waitingroom.store``).

Not a JWT, as the buyers' tokens are (``buyers.tokens``): a buyer's token is checked
once a process and remembered, while each admission is checked once, on the gate's
hottest path, where PyJWT's parsing and claim checks cost more than the signature
(``python -m benchmarks.room_cost`` measures what the room adds).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import time
from dataclasses import dataclass

from django.conf import settings
from django.utils.crypto import salted_hmac
from itsdangerous import BadSignature, Signer

SALT = "flashsale.waitingroom.admission"
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
def _signer(secret: str) -> Signer:
    # The key derived here once (salted for admissions alone), not at every check.
    key = salted_hmac(SALT, "key", secret=secret, algorithm="sha256").digest()
    return Signer(key, digest_method=hashlib.sha256, key_derivation="none")


def admission_token(*, buyer: str, sku: str, sale: str, expires_at: int) -> str:
    fields = json.dumps([buyer, sku, sale, expires_at], separators=(",", ":")).encode()
    return _signer(settings.SECRET_KEY).sign(base64.urlsafe_b64encode(fields).rstrip(b"=")).decode()


def admission_read(token: str) -> Admission:
    """What a token admits.

    :raises TokenRefused: forged, altered, expired, or not an admission.
    """
    try:
        payload = _signer(settings.SECRET_KEY).unsign(token)
        fields = json.loads(base64.urlsafe_b64decode(payload + b"=" * (-len(payload) % 4)))
    except BadSignature as e:
        raise TokenRefused(str(e)) from e
    except ValueError as e:  # signed by us, yet not an admission's fields (never issued)
        raise TokenRefused(f"not an admission: {e}") from e
    named = isinstance(fields, list) and len(fields) == 4 and isinstance(fields[3], int)
    if not (named and all(isinstance(f, str) and f for f in fields[:3])):
        raise TokenRefused("the token names no buyer, sku, sale and end")
    if time.time() >= fields[3] + LEEWAY_S:
        raise TokenRefused("the admission has expired")
    return Admission(*fields)
