"""Two cache classes the scenarios set beside the product page's read
(``inventory.readcache``), each a rebuild under a lock from ``locking``:

- ``MutexRebuild`` (scenario S19, cache breakdown, 缓存击穿): the entry expires for
  real; a reader that misses takes a lock on the rebuild, looks again once it has
  it, and loads only if the entry is still missing. The others wait for the lock, a
  bounded time, and then find the value the first one wrote. Nobody reads an old
  value; a miss costs every reader that wait.
- ``GuardedCacheAside`` (scenario S20; article 004's read-write lock): a rebuild
  holds a read lock from reading the row to writing the entry; a write holds the
  write lock from changing the row to deleting the entry. Rebuilds run side by side;
  a write waits for those under way, and the entry is never older than the last
  completed write. A hit takes no lock.

Both run on the shared cache (django-redis). A Redis that is slow or gone costs the
load, never the answer: each falls back to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.core.cache import cache

from common.cache_errors import UNREADABLE, cache_read, cache_write
from locking.base import BaseLock, BaseLockBackend
from locking.exceptions import LockNotAcquiredError

if TYPE_CHECKING:
    from locking.backends.redis.redisson_rw import ReadWriteLock, RedissonReadWriteLockBackend


class _LockedRebuild:
    """A miss rebuilds the entry under a lock (``_guard``), bounded by ``wait_s``, and
    looks again once it has it: the holder before it may have written the entry."""

    def __init__(self, *, load: Callable[[str], Any], key: Callable[[str], str], ttl_s: float,
                 locks: BaseLockBackend, wait_s: float = 2.0):
        self.load, self.key, self.ttl_s, self.locks, self.wait_s = load, key, ttl_s, locks, wait_s

    def _guard(self, key: str) -> BaseLock:
        raise NotImplementedError

    def get(self, name: str) -> Any:
        key = self.key(name)
        value = cache_read(key)
        if value is UNREADABLE:
            return self.load(name)
        if value is not None:
            return value
        lock = self._guard(key)
        if not lock.acquire(timeout=self.wait_s):
            # Whoever holds it is slow: load rather than fail (the wait was the bound).
            return self.load(name)
        try:
            value = cache_read(key)
            if value is None or value is UNREADABLE:
                value = self.load(name)
                cache_write(key, value, self.ttl_s)
            return value
        finally:
            lock.release()


class MutexRebuild(_LockedRebuild):
    def _guard(self, key: str) -> BaseLock:
        return self.locks.lock(f"rebuild:{key}")


class GuardedCacheAside(_LockedRebuild):
    locks: RedissonReadWriteLockBackend

    def _guard(self, key: str) -> BaseLock:
        # Rebuilds share it; an update (below) waits for those under way.
        return self._lock(key).read

    def _lock(self, key: str) -> ReadWriteLock:
        return self.locks.read_write_lock(f"cache:{key}")

    def update(self, name: str, change: Callable[[], Any]) -> Any:
        """Run ``change`` (which writes the row) and drop the entry, under the write
        lock; what ``change`` returns. Raises ``LockNotAcquiredError`` when the
        rebuilds under way outlast the wait."""
        key = self.key(name)
        write = self._lock(key).write
        if not write.acquire(timeout=self.wait_s):
            raise LockNotAcquiredError(f"rebuilds of {key} outlasted {self.wait_s}s", lock_name=write.name)
        try:
            result = change()
            # Not through cache_write's forgiveness: an entry that should have gone
            # and stayed would be served until it expires, so a failure is raised.
            cache.delete(key)
            return result
        finally:
            write.release()
