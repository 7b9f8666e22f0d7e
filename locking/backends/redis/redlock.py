"""``redlock``: the Redlock algorithm over N independent Redis masters (article 004
第三种; redis.io's "Distributed Locks with Redis").

Acquire: the same random token ``SET key token NX PX ttl`` on every master, each
with a short socket timeout so a dead master costs little. The lock is held if a
majority (N // 2 + 1) said yes and what is left of the lease after the time spent
asking (and an allowance for clock drift) is still positive: the *validity*.
Otherwise the attempt is undone on every master, and a blocking acquire tries
again after a random pause (so contenders do not keep splitting the votes).
Release: the Lua compare-and-delete on every master.

Failure semantics: the lock survives fewer than half of the masters failing or
losing the key (S10 restarts one empty). More than that, a master that restarts
without persistence before the lease is over, or a holder paused past its
validity, and two holders are possible again; it hands out no fencing token (a
counter would have to agree across the masters). The masters must be independent:
replicas of one another would bring back the failover problem it exists to avoid.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from typing import Any

import redis

from ...base import BaseLock, BaseLockBackend
from ...exceptions import LockNotOwnedError
from .base import lua


class RedlockLock(BaseLock):
    def __init__(self, name: str, *, backend: RedlockBackend, ttl_ms: int = 10_000,
                 retry_interval: float = 0.05, clock_drift_factor: float = 0.01,
                 wait_timeout: float | None = None):
        super().__init__(name, wait_timeout=wait_timeout)
        self.backend = backend
        self.key = f"{backend.key_prefix}{name}"
        self.ttl_ms = int(ttl_ms)
        self.retry_interval = float(retry_interval)
        self.clock_drift_factor = float(clock_drift_factor)
        self._local = threading.local()  # this thread's token, votes and validity

    @property
    def token(self) -> str | None:
        return getattr(self._local, "token", None)

    @property
    def votes(self) -> int:
        """Masters that granted this thread's current holding (its last attempt's, if
        that failed)."""
        return getattr(self._local, "votes", 0)

    @property
    def validity_ms(self) -> float:
        """How long the holding is safe for, counted from the start of the attempt
        that won it (0 when not held)."""
        return getattr(self._local, "validity_ms", 0.0) if self.token is not None else 0.0

    def _set_on(self, client: redis.Redis, token: str) -> bool:
        try:
            return bool(client.set(self.key, token, nx=True, px=self.ttl_ms))
        except redis.RedisError:  # down or slow: a vote not given
            return False

    def _delete_on_all(self, token: str) -> int:
        deleted = 0
        for _client, delete in self.backend.masters:
            try:
                deleted += delete(keys=[self.key], args=[token])
            except redis.RedisError:
                pass
        return deleted

    def try_acquire(self) -> bool:
        drift_ms = self.ttl_ms * self.clock_drift_factor + 2
        token = uuid.uuid4().hex
        started = time.monotonic()
        votes = sum(self._set_on(client, token) for client, _ in self.backend.masters)
        validity_ms = self.ttl_ms - (time.monotonic() - started) * 1000 - drift_ms
        self._local.votes = votes
        if votes >= self.backend.quorum and validity_ms > 0:
            self._local.token, self._local.validity_ms = token, validity_ms
            return True
        self._delete_on_all(token)  # a minority's keys would only block the others
        return False

    def retry_pause(self) -> float:
        # Random, as the algorithm asks: clients that failed together do not retry
        # together.
        return random.uniform(0, self.retry_interval)

    def do_release(self) -> None:
        token = self.token
        if token is None:
            raise LockNotOwnedError("release of a lock this thread did not acquire", lock_name=self.name)
        self._local.token = None
        if self._delete_on_all(token) < self.backend.quorum:
            raise LockNotOwnedError("the lock had expired (or been lost) on most masters",
                                    lock_name=self.name)

    def locked(self) -> bool:
        held = 0
        for client, _ in self.backend.masters:
            try:
                held += bool(client.exists(self.key))
            except redis.RedisError:
                pass
        return held >= self.backend.quorum


class RedlockBackend(BaseLockBackend):
    """OPTIONS: ``urls`` (the independent masters), ``key_prefix`` ("lock:"),
    ``ttl_ms`` (10000), ``retry_interval`` seconds (0.05), ``clock_drift_factor``
    (0.01), ``socket_timeout`` seconds per master (0.05), ``wait_timeout`` seconds."""

    server = "redis"

    def __init__(self, alias: str, options: dict[str, Any]):
        super().__init__(alias, options)
        urls = self.options.pop("urls")
        self.key_prefix = self.options.pop("key_prefix", "lock:")
        socket_timeout = float(self.options.pop("socket_timeout", 0.05))
        if len(urls) < 3:
            raise ValueError("Redlock needs at least 3 independent masters")
        self.masters = []
        for url in urls:
            client = redis.Redis.from_url(url, socket_timeout=socket_timeout,
                                          socket_connect_timeout=socket_timeout)
            self.masters.append((client, client.register_script(lua("compare_and_delete"))))
        self.quorum = len(urls) // 2 + 1

    def check(self, timeout: float) -> None:
        """A quorum of masters answers (each within its own socket timeout)."""
        answered = 0
        for client, _ in self.masters:
            try:
                answered += bool(client.ping())
            except redis.RedisError:
                pass
        if answered < self.quorum:
            raise ConnectionError(f"{answered} of {len(self.masters)} Redis masters answered; "
                                  f"a lock needs {self.quorum}")

    def lock(self, name: str) -> RedlockLock:
        return RedlockLock(name, backend=self, wait_timeout=self.wait_timeout, **self.options)

    def close(self) -> None:
        for client, _ in self.masters:
            client.close()
