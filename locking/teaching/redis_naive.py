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

Never configure these as a strategy.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import redis


class NaiveSetnxLock:
    def __init__(self, client: redis.Redis, key: str, *, ttl_ms: int | None = None,
                 separate_expire: bool = False, release: str = "del",
                 between_set_and_expire: Callable[[], None] = lambda: None,
                 between_get_and_del: Callable[[], None] = lambda: None):
        if release not in ("del", "get_then_del"):
            raise ValueError(f"unknown release {release!r}")
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
            self.client.pexpire(self.key, self.ttl_ms)
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
