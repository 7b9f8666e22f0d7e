"""``redisson-fair``: Redisson's RedissonFairLock on redis-py: first come, first served.

Everything ``redisson`` is (a reentrant hash of holder -> hold count, the watchdog,
fencing tokens, the unlock latch) plus a line of waiters (article 004 asks for a fair
lock: 这把锁最好是一把公平锁; scenario S18 shows what it changes):

- a holder that cannot take the lock joins the line (a list, first come first) and
  only the first in line may take it once it is free: a thread that just released
  cannot take it back ahead of those waiting, which ``redisson`` allows;
- a release wakes the first in line only: its message names that waiter;
- a waiter keeps its place by asking again at least every third of
  ``waiter_timeout_ms``; one that stops asking (its process died) is dropped from
  the line once that time has passed since it last asked, so it blocks the others
  for at most that long. A waiter whose wait times out leaves the line at once.

Where this follows Redisson's fair lock and where it differs:

- As Redisson: the line is a list beside a sorted set of deadlines; the acquire
  script drops stale waiters, then takes the lock if it is free and the caller is
  first (or nobody waits), else re-enters, else queues the caller; the release
  script publishes to the first in line; a timed-out acquire leaves the line.
- Redisson gives each waiter, when it joins, the deadline of the waiter ahead plus
  ``threadWaitTime`` (5 minutes by default) and takes ``threadWaitTime`` off every
  deadline in the line at each acquisition (a ZINCRBY per waiter). Here a deadline
  is the waiter's own last ask plus ``waiter_timeout_ms``: asking again renews it,
  so the cost of an acquisition does not grow with the line, and a live waiter is
  never dropped however long the line.
- Redisson passes each client's clock; here the scripts read the server's (TIME).
- Redisson subscribes each waiter to a channel of its own; here one channel per lock
  carries the waiter's name, and each process's one pub/sub connection hands the
  message to that waiter only (``Wakeups``).
- A non-blocking ``acquire(blocking=False)`` takes the lock only when nobody waits
  (or the caller is first), as Redisson's ``tryLock()``; it never joins the line.
"""

from __future__ import annotations

import logging
from typing import Any

import redis

from .base import reply_number, reply_pair
from .redisson import UNLOCK_LATCH_MS, RedissonLock, RedissonLockBackend

logger = logging.getLogger(__name__)


class RedissonFairLock(RedissonLock):
    addressed = True  # a release names the first in line
    backend: RedissonFairLockBackend

    def __init__(self, name: str, *, backend: RedissonFairLockBackend, **options: Any):
        super().__init__(name, backend=backend, **options)
        prefix = backend.key_prefix
        # One channel for the lock, every message naming the waiter it wakes.
        self.channel = f"{prefix}channel:{{{name}}}"
        self.line = f"{prefix}line:{{{name}}}"
        self.deadlines = f"{prefix}deadlines:{{{name}}}"

    @property
    def _ask_every(self) -> float:
        """Seconds between a waiter's asks: its timeout ÷ 3, so one late ask (a busy
        process) does not cost it its place."""
        return self.backend.waiter_timeout_ms / 3 / 1000

    def _acquire_script(self, holder: str, *, waiting: bool) -> tuple[int, int | None]:
        return reply_pair(self.backend.script["redisson_fair_acquire"](
            keys=[self.key, self.fence_key, self.line, self.deadlines, self.channel],
            args=[self._lease, holder, self.backend.waiter_timeout_ms, int(waiting)]))

    def do_acquire(self, *, blocking: bool, timeout: float | None) -> bool:
        # A blocking acquire joins the line with its first ask: its arrival is then.
        return self._wait_asking(blocking=blocking, timeout=timeout)

    def _sleep_s(self, ttl_ms: int) -> float:
        return self._ask_every  # asking again keeps its place in line

    def _give_up(self, holder: str) -> None:
        try:
            self.backend.script["redisson_fair_leave"](
                keys=[self.key, self.line, self.deadlines, self.channel], args=[holder])
        except redis.RedisError as e:  # its deadline drops it from the line instead
            logger.warning("leaving the line of %s failed: %s", self.name, e)

    def _release_script(self, holder: str, latch: str, *, retry: bool) -> int | None:
        return reply_number(self.backend.script["redisson_fair_release"](
            keys=[self.key, latch, self.line, self.deadlines, self.channel],
            args=[self._lease, holder, UNLOCK_LATCH_MS, int(retry)]))

    def force_release(self) -> bool:
        """Delete the lock whoever holds it and wake the first in line; True if it was held."""
        self.backend.watchdog.unwatch(self.key)
        return bool(self.backend.script["redisson_fair_force_release"](
            keys=[self.key, self.line, self.deadlines, self.channel]))

    # The fair lock keeps Redisson's hash {holder: count} (take_hold.lua,
    # give_back.lua): its line, not the layout, is what it adds.
    def owned(self) -> bool:
        return bool(self.backend.client.hexists(self.key, self.holder()))

    def hold_count(self) -> int:
        count = self.backend.client.hget(self.key, self.holder())
        return int(count) if count is not None else 0

    def waiting(self) -> list[str]:
        """The holders in line, first first (for tests and figures)."""
        return [w.decode() for w in self.backend.client.lrange(self.line, 0, -1)]


class RedissonFairLockBackend(RedissonLockBackend):
    """OPTIONS: those of ``RedissonLockBackend`` plus ``waiter_timeout_ms`` (3000):
    how long a waiter that stopped asking keeps its place in line."""

    lock_class = RedissonFairLock
    scripts = ("redisson_fair_acquire", "redisson_fair_release", "redisson_fair_leave",
               "redisson_fair_force_release", "redisson_fair_renew")
    renew_script = "redisson_fair_renew"

    def __init__(self, alias: str, options: dict[str, Any]):
        options = dict(options)
        self.waiter_timeout_ms = int(options.pop("waiter_timeout_ms", 3_000))
        super().__init__(alias, options)
