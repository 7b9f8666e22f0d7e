"""A read-write lock after Redisson's RReadWriteLock, on redis-py (article 004 guards its
catalogue cache with one: 读写锁; scenario S20 shows what it fixes).

``backend.read_write_lock(name)`` has two halves, ``.read`` and ``.write``, each a
lock like every other here:

- readers share it; a writer excludes readers and other writers;
- both halves are reentrant, per holder (the process and the thread, as ``redisson``);
- the write holder may take the read lock too (a downgrade): once it releases the
  write lock it goes on reading, and other readers may join;
- a read holder that asks for the write lock (an upgrade) gets
  :class:`LockUpgradeError` at once;
- without an explicit lease the watchdog renews the holder's holds, in both modes;
- a release that frees the lock, or leaves it readable, wakes every waiter with one
  message; waiters sleep until then (bounded by the lock's TTL), no polling.

Where this follows Redisson's RedissonReadLock/RedissonWriteLock and where it differs:

- As Redisson: one hash per lock with its mode and, per holder and mode, a hold
  count; the write holder's own reads in the same hash; one channel per lock; an
  unlock latch so that a release retried after a lost reply is not counted twice.
- Read leases: Redisson keeps a key with a TTL per read hold and, at each release,
  reads the TTL of every hold of every reader to set the lock's. Here the readers'
  leases are one sorted set (reader -> lease end, by the server's clock), and every
  script first drops the readers whose lease lapsed: one ZRANGEBYSCORE when nobody
  lapsed, whatever the number of readers.
- Upgrade: Redisson queues the writer behind the readers, itself among them: it
  waits for its own read hold to end, until its wait times out (forever without
  one; Redisson's docs warn of it). Refused here.
- Writers first: Redisson lets a new reader in while a writer waits, so a steady
  crowd of readers keeps every writer out. Here a blocking writer that cannot take
  the lock marks itself waiting (renewed at each of its asks, so a dead writer's
  mark lapses within ``writer_timeout_ms``), and new readers wait behind the mark,
  as Java's ReentrantReadWriteLock does. A re-entry or a downgrade never waits.
- Redisson's write release that leaves the holder's reads switches the mode without
  a message, and its waiting readers sleep until the lock's TTL; here it wakes them.
- No fencing tokens (``fence`` is None).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import redis

from ...exceptions import LockUpgradeError
from .base import reply_number, reply_pair
from .redisson import UNLOCK_LATCH_MS, RedissonLock, RedissonLockBackend
from .wakeups import EVERYONE

logger = logging.getLogger(__name__)


class _Half(RedissonLock):
    """What the read and the write lock share: the keys, the wait, the release."""

    mode = ""  # "r" or "w": the holder's hash field is "<mode>:<holder>"
    backend: RedissonReadWriteLockBackend

    def __init__(self, name: str, *, backend: RedissonReadWriteLockBackend, **options: Any):
        super().__init__(name, backend=backend, **options)
        prefix = backend.key_prefix
        # {name}: one hash tag, one cluster slot for every key of the lock.
        self.key = f"{prefix}rw:{{{name}}}"
        self.readers = f"{prefix}rw-readers:{{{name}}}"
        self.writers = f"{prefix}rw-writers:{{{name}}}"
        self.channel = f"{prefix}rw-channel:{{{name}}}"
        self._latch_prefix = f"{prefix}rw-unlock-latch:{{{name}}}:"

    def _keys(self) -> list[str]:
        return [self.key, self.readers, self.writers, self.channel]

    def do_acquire(self, *, blocking: bool, timeout: float | None) -> bool:
        return self._wait_asking(blocking=blocking, timeout=timeout)

    def _watch(self, holder: str) -> None:
        # One entry per holder for both halves: the renewal renews both modes, and
        # the release that leaves the holder nothing (the script answers 1) ends it.
        self.backend.watchdog.watch(self.key, holder, keys=[self.key, self.readers, self.channel],
                                    args=(EVERYONE,))

    def _release_script(self, holder: str, latch: str, *, retry: bool) -> int | None:
        """None (no hold of this mode), 0 (the holder still holds the lock), 1 (it
        holds nothing of it any more)."""
        return reply_number(self.backend.script["rw_release"](
            keys=[self.key, self.readers, self.channel, latch],
            args=[self.mode, holder, self._lease, EVERYONE, UNLOCK_LATCH_MS, int(retry)]))

    def hold_count(self) -> int:
        """How many times this thread holds this half (0 when it doesn't)."""
        count = self.backend.client.hget(self.key, f"{self.mode}:{self.holder()}")
        return int(count) if count is not None else 0

    def owned(self) -> bool:
        return self.hold_count() > 0

    def force_release(self) -> bool:
        """Delete the lock whoever holds it, in either mode, and wake every waiter;
        True if it was held."""
        self.backend.watchdog.unwatch(self.key)
        return bool(self.backend.script["rw_force_release"](
            keys=[self.key, self.readers, self.channel], args=[EVERYONE]))


class RedissonReadLock(_Half):
    mode = "r"

    def _acquire_script(self, holder: str, *, waiting: bool) -> tuple[int, int | None]:
        return reply_pair(self.backend.script["rw_read_acquire"](
            keys=self._keys(), args=[self._lease, holder, EVERYONE, self.backend.writer_timeout_ms]))

    def locked(self) -> bool:
        """Whether anyone holds a read hold."""
        return any(field.startswith(b"r:") for field in self.backend.client.hkeys(self.key))


class RedissonWriteLock(_Half):
    mode = "w"

    def _acquire_script(self, holder: str, *, waiting: bool) -> tuple[int, int | None]:
        taken, ttl = self.backend.script["rw_write_acquire"](
            keys=self._keys(),
            args=[self._lease, holder, EVERYONE, self.backend.writer_timeout_ms, int(waiting)])
        if taken == -1:
            raise LockUpgradeError("this thread holds the read lock: release it before taking the "
                                   "write lock (an upgrade would wait for itself)", lock_name=self.name)
        return taken, ttl

    def _sleep_s(self, ttl_ms: int) -> float:
        # Ask again at least every third of the mark's life, or the mark lapses and
        # new readers get in ahead of this writer.
        return min(super()._sleep_s(ttl_ms), self.backend.writer_timeout_ms / 3 / 1000)

    def _give_up(self, holder: str) -> None:
        try:
            self.backend.client.zrem(self.writers, holder)
        except redis.RedisError as e:  # the mark lapses on its own
            logger.warning("unmarking a writer of %s failed: %s", self.name, e)

    def locked(self) -> bool:
        return bool(self.backend.client.hget(self.key, "mode") == b"write")

    def waiting(self) -> list[str]:
        """The writers marked waiting for it (for scenarios and tests)."""
        return [w.decode() for w in self.backend.client.zrange(self.writers, 0, -1)]


@dataclass(frozen=True)
class ReadWriteLock:
    """The two halves of one read-write lock, as Redisson's ``readLock()`` and
    ``writeLock()``."""

    read: RedissonReadLock
    write: RedissonWriteLock


class RedissonReadWriteLockBackend(RedissonLockBackend):
    """OPTIONS: those of ``RedissonLockBackend`` plus ``writer_timeout_ms`` (3000):
    how long a waiting writer's mark holds new readers back after its last ask.

    ``lock(name)`` is the write half, the exclusive lock a caller that only wants
    mutual exclusion takes."""

    lock_class = RedissonWriteLock
    scripts = ("rw_read_acquire", "rw_write_acquire", "rw_release", "rw_renew", "rw_force_release")
    renew_script = "rw_renew"

    def __init__(self, alias: str, options: dict[str, Any]):
        options = dict(options)
        self.writer_timeout_ms = int(options.pop("writer_timeout_ms", 3_000))
        super().__init__(alias, options)

    def read_write_lock(self, name: str) -> ReadWriteLock:
        options = {"backend": self, "wait_timeout": self.wait_timeout, **self.options}
        return ReadWriteLock(read=RedissonReadLock(name, **options), write=RedissonWriteLock(name, **options))
