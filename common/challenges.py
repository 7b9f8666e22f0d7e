"""Proof of work before what a bot would take by the thousand (a new account, a place
in a waiting room): hashcash, as Queue-it's proof-of-work challenge and Cloudflare's
Turnstile in front of a waiting room ask it.

The server issues a challenge: a signed token naming its purpose (``sign-up``,
``room:<sku>``), its difficulty in bits and its end, with an id of its own. The
client finds a nonce such that SHA-256 of ``<token>:<nonce>`` starts with that many
zero bits (about 2^bits hashes: 2^16 is a few tens of milliseconds in a browser's
Web Worker, hundreds of thousands of them a bot's CPU-seconds) and sends
``<token>:<nonce>`` with its request. Checking it costs the server one HMAC and one
hash, and one ``SET NX`` that makes each solution good once.

A solution is refused (``ChallengeRefused``, 403 ``challenge_refused``, its
``reason``) when missing, forged or altered, of another purpose, easier than the
door now asks, past its end, short of its zero bits, or used before. The work is read
without I/O (``challenge_read``); its single use is a ``SET NX``: in the shared cache
(``challenge_verify``: when that Redis cannot be reached, a solution is not checked
for reuse, logged, and the door stays open to those who did the work), or in the
script of the door's own state (the waiting room's ask), at no extra round trip.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from itsdangerous import BadSignature, URLSafeSerializer

from .cache_errors import CACHE_ERRORS
from .errors import ChallengeRefused
from .work import challenge_solve, zero_bits

__all__ = ["Challenge", "Proof", "challenge_issue", "challenge_read", "challenge_solve", "challenge_verify",
           "zero_bits"]

logger = logging.getLogger(__name__)

MOST_BITS = 32  # past it a solution takes a browser hours: a setting's bound
_SALT = "flashsale.challenges"


@dataclass(frozen=True)
class Challenge:
    token: str
    bits: int
    expires_at: int  # epoch seconds


def _serializer() -> URLSafeSerializer:
    return URLSafeSerializer(settings.SECRET_KEY, salt=_SALT, signer_kwargs={"digest_method": hashlib.sha256})


def challenge_issue(*, purpose: str, bits: int) -> Challenge:
    """A challenge for ``purpose`` of ``bits`` zero bits, good for
    ``FLASHSALE_CHALLENGE_TTL_S``."""
    expires = int(time.time()) + settings.FLASHSALE_CHALLENGE_TTL_S
    token = _serializer().dumps([purpose, bits, expires, secrets.token_hex(8)])
    return Challenge(token, bits, expires)


@dataclass(frozen=True)
class Proof:
    """A solution's work, checked offline (``challenge_read``): what is left is to
    mark it used once (a ``SET NX`` of a key its ``challenge_id`` names, kept
    ``ttl_s``, till the challenge's end)."""

    bits: int
    challenge_id: str
    ttl_s: int


def challenge_read(*, solution: str | None, purpose: str) -> Proof:
    """The work ``solution`` shows for ``purpose``: signed here, for that purpose,
    unexpired, solved to its bits. No I/O: whether it is easier than the door asks
    and whether it was used before are the caller's to decide.

    :raises ChallengeRefused: with why (``reason``).
    """
    if not solution or ":" not in solution:
        raise ChallengeRefused.because("missing", purpose)
    token, _, nonce = solution.rpartition(":")
    try:
        given_purpose, given_bits, expires, challenge_id = _serializer().loads(token)
    except (BadSignature, ValueError, TypeError):
        raise ChallengeRefused.because("invalid", purpose) from None
    if given_purpose != purpose:
        raise ChallengeRefused.because("other_purpose", purpose)
    if not isinstance(given_bits, int) or not isinstance(challenge_id, str):
        raise ChallengeRefused.because("invalid", purpose)
    left = expires - time.time() if isinstance(expires, int | float) else -1
    if left <= 0:
        raise ChallengeRefused.because("expired", purpose)
    if len(nonce) > 20 or zero_bits(hashlib.sha256(solution.encode()).digest()) < given_bits:
        raise ChallengeRefused.because("unsolved", purpose)
    return Proof(given_bits, challenge_id, int(left) + 1)


def challenge_verify(*, solution: str | None, purpose: str, bits: int) -> None:
    """Accept ``solution`` for ``purpose`` at ``bits`` (0: nothing asked), once: its
    use marked in the shared cache.

    :raises ChallengeRefused: with why (``reason``).
    """
    if bits <= 0:
        return
    proof = challenge_read(solution=solution, purpose=purpose)
    if proof.bits < bits:
        raise ChallengeRefused.because("too_easy", purpose)
    try:
        fresh = cache.add(f"challenge:{proof.challenge_id}", 1, timeout=proof.ttl_s)
    except CACHE_ERRORS as e:
        logger.warning("challenges: Redis unreachable, a solution not checked for reuse: %s", e)
        return
    if not fresh:
        raise ChallengeRefused.because("used", purpose)
