"""A process-local lock: one ``threading.Lock`` per name, shared by the threads of
this process and invisible to every other process.

Correct for one process; behind nginx with two instances (or one instance with
several workers) each process has its own lock, so the stock oversells (scenario
S1). That is the point of shipping it.
"""

from __future__ import annotations

import threading
from typing import Any

from ..base import BaseLock, BaseLockBackend, thread_token
from ..exceptions import LockNotOwnedError

# Module level, as Django's locmem cache keeps ``_locks``: every backend instance
# in the process must hand out the same lock for the same name.
_locks: dict[str, threading.Lock] = {}


class LocalLock(BaseLock):
    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self._lock = _locks.setdefault(name, threading.Lock())
        self._owner: str | None = None

    # threading.Lock waits by itself, woken by the release: no polling.
    def do_acquire(self, *, blocking: bool, timeout: float | None) -> bool:
        if not blocking:
            acquired = self._lock.acquire(blocking=False)
        else:
            acquired = self._lock.acquire(timeout=-1 if timeout is None else timeout)
        if acquired:
            self._owner = thread_token()
        return acquired

    def do_release(self) -> None:
        # threading.Lock lets any thread release; a lock protocol should not.
        if self._owner != thread_token():
            raise LockNotOwnedError("lock is not held by this thread", lock_name=self.name)
        self._owner = None
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()


class LocalLockBackend(BaseLockBackend):
    lock_class = LocalLock
