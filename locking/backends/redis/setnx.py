"""``setnx``: ``SET key token NX PX ttl`` to acquire, a Lua compare-and-delete to
release (articles 001 and 003). Each acquisition also takes the next fencing token
from a counter beside the key (``<key>:fence``), in the same script.

Failure semantics: the key expires ``ttl_ms`` after it was taken whether or not the
holder is done; a holder that runs longer than that shares the critical section
with the next one (scenario S5; ``redisson``'s watchdog is the fix). Its release
then finds another token and raises :class:`LockNotOwnedError` without deleting it.
Waiting is polling: one SET every ``retry_interval`` until ``wait_timeout``.

Replication is asynchronous: a master that fails over before the key reached its
replica hands the lock to a second client (S10). With ``replicas=N`` an acquisition
counts only once N replicas acknowledged it (Redis ``WAIT``, up to
``replica_timeout_ms``); otherwise the key is deleted again and the attempt failed.
That closes the window for a failover to an acknowledging replica; it does not make
Redis strongly consistent.
"""

from __future__ import annotations

import threading
import uuid

from ...base import BaseLock
from ...exceptions import LockNotOwnedError
from .base import UNREACHABLE, RedisLockBackend


class SetnxLock(BaseLock):
    unavailable = UNREACHABLE

    # Past six parameters: the lock's options (settings.LOCKING), by name.
    def __init__(self, name: str, *, backend: SetnxLockBackend, ttl_ms: int = 10_000,  # noqa: PLR0913
                 retry_interval: float = 0.02, replicas: int = 0, replica_timeout_ms: int = 100,
                 wait_timeout: float | None = None):
        super().__init__(name, wait_timeout=wait_timeout)
        self.backend = backend
        self.key = f"{backend.key_prefix}{name}"
        self.fence_key = f"{self.key}:fence"
        self.ttl_ms = int(ttl_ms)
        self.retry_interval = float(retry_interval)
        self.replicas = int(replicas)
        self.replica_timeout_ms = int(replica_timeout_ms)
        # One token per holder: this lock object in this thread, fresh per acquire.
        self._local = threading.local()

    @property
    def token(self) -> str | None:
        return getattr(self._local, "token", None)

    @property
    def fence(self) -> int | None:
        held = getattr(self._local, "token", None) is not None
        return getattr(self._local, "fence", None) if held else None

    def try_acquire(self) -> bool:
        """One attempt: whether the lock was taken (and, with ``replicas``,
        acknowledged by that many replicas); its fencing token kept for the holding."""
        token = uuid.uuid4().hex
        acquire = self.backend.script["setnx_acquire"]
        keys = [self.key, self.fence_key]
        args: list[str | int] = [token, self.ttl_ms]
        if not self.replicas:
            fence = acquire(keys=keys, args=args)
        else:
            # WAIT counts the writes of its own connection: it must follow the SET on
            # the same one, which a pipeline guarantees (and it saves a round trip).
            pipe = self.backend.client.pipeline(transaction=False)
            acquire(keys=keys, args=args, client=pipe)
            pipe.execute_command("WAIT", self.replicas, self.replica_timeout_ms)
            fence, acknowledged = pipe.execute()
            if fence is not None and acknowledged < self.replicas:
                self.backend.script["compare_and_delete"](keys=[self.key], args=[token])
                return False
        if fence is None:
            return False
        self._local.token, self._local.fence = token, int(fence)
        return True

    def retry_pause(self) -> float:
        return self.retry_interval

    def do_release(self) -> None:
        token = self.token
        if token is None:
            raise LockNotOwnedError("release of a lock this thread did not acquire", lock_name=self.name)
        self._local.token = None
        if not self.backend.script["compare_and_delete"](keys=[self.key], args=[token]):
            raise LockNotOwnedError(
                "lock expired and is held by someone else (or no one); nothing deleted",
                lock_name=self.name,
            )

    def locked(self) -> bool:
        return bool(self.backend.client.exists(self.key))

    def owned(self) -> bool:
        token = self.token
        return token is not None and self.backend.client.get(self.key) == token.encode()


class SetnxLockBackend(RedisLockBackend):
    """OPTIONS: ``url``, ``key_prefix``, ``ttl_ms`` (10000), ``retry_interval``
    seconds (0.02), ``replicas`` (0) and ``replica_timeout_ms`` (100),
    ``wait_timeout`` seconds."""

    scripts = ("setnx_acquire", "compare_and_delete")

    def lock(self, name: str) -> SetnxLock:
        return SetnxLock(name, backend=self, wait_timeout=self.wait_timeout, **self.options)
