"""BROKEN ON PURPOSE: the SETNX locks the seed articles start from (001, 003, 004),
one flaw at a time, so each can be shown beside ``locking.backends.redis.setnx``.

``NaiveSetnxLock`` is configured to be wrong in one chosen way:

- ``ttl_ms=None``: SETNX with no expiry; a holder that dies never frees it (S3).
- ``separate_expire=True``: SETNX, then EXPIRE as a second command; a crash in
  between (the ``between_set_and_expire`` hook) leaves a key without a TTL (S4).
- ``release="del"``: release is a plain DEL, no owner check; a holder whose key
  expired deletes the next holder's lock (S6).
- ``release="get_then_del"``: the owner check is a GET in the client, then a DEL;
  the key can change hands in the gap (``between_get_and_del`` hook) (S7).

``GetsetExpiryLock`` is article 004's second way (SETNX of an expiry time, GET and
GETSET to take over an expired one): expiry is judged by each client's clock, so a
client whose clock runs ahead takes over a live lock (S14).

Never configure these as a strategy.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import cast

import redis


class NaiveSetnxLock:
    # Past six parameters: each a defect a scenario switches on.
    def __init__(self, client: redis.Redis, key: str, *, ttl_ms: int | None = None,  # noqa: PLR0913
                 separate_expire: bool = False, release: str = "del",
                 between_set_and_expire: Callable[[], None] = lambda: None,
                 between_get_and_del: Callable[[], None] = lambda: None):
        if release not in ("del", "get_then_del"):
            raise ValueError(f"unknown release {release!r}")
        if separate_expire and ttl_ms is None:
            raise ValueError("separate_expire sets a ttl: ttl_ms is needed")
        self.client = client
        self.key = key
        self.ttl_ms = ttl_ms
        self.separate_expire = separate_expire
        self.release_mode = release
        self.between_set_and_expire = between_set_and_expire
        self.between_get_and_del = between_get_and_del
        self.token = uuid.uuid4().hex

    def acquire(self, blocking: bool = False) -> bool:
        """One try, no waiting (whatever ``blocking`` says): the seeds'
        ``if (setnx(...)) { ... }``."""
        if self.separate_expire:
            if not self.client.setnx(self.key, self.token):
                return False
            self.between_set_and_expire()  # a crash here leaves the key forever
            self.client.pexpire(self.key, cast(int, self.ttl_ms))  # set with separate_expire
            return True
        if self.ttl_ms is None:
            return bool(self.client.setnx(self.key, self.token))
        return bool(self.client.set(self.key, self.token, nx=True, px=self.ttl_ms))

    def release(self) -> bool:
        """True if a key was deleted (whoever's it was)."""
        if self.release_mode == "del":
            return bool(self.client.delete(self.key))
        if self.client.get(self.key) != self.token.encode():
            return False
        self.between_get_and_del()  # the key may expire and be taken right here
        return bool(self.client.delete(self.key))


class GetsetExpiryLock:
    """Article 004, 第二种, step by step. The key's value is the holder's expiry time
    by its own clock; there is no Redis TTL and no owner token.

    :param clock: this client's wall clock (``time.time``); a scenario passes one
        that runs ahead, as a host whose NTP drifted would.
    """

    def __init__(self, client: redis.Redis, key: str, *, lease_ms: int,
                 clock: Callable[[], float] = time.time):
        self.client = client
        self.key = key
        self.lease = lease_ms / 1000
        self.clock = clock
        self.acquired_at: float | None = None

    def acquire(self) -> bool:
        """One try: SETNX; else take over a value that is in the past by our clock,
        if GETSET shows nobody took it over first."""
        now = self.clock()
        expires = repr(now + self.lease).encode()
        if self.client.setnx(self.key, expires):  # step 1
            self.acquired_at = now
            return True
        old = self.client.get(self.key)  # step 2: expired? by *our* clock
        if old is None or float(old) >= now:
            return False
        if self.client.getset(self.key, expires) != old:  # steps 3 and 4
            return False  # someone else's GETSET came first
        self.acquired_at = now
        return True

    def release(self) -> bool:
        """Step 5: DEL only if, by our clock, our lease has not run out. True if a
        key was deleted (whoever's it was)."""
        if self.acquired_at is None or self.clock() - self.acquired_at >= self.lease:
            return False
        self.acquired_at = None
        return bool(self.client.delete(self.key))
