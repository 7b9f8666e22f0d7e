"""``redisson``: Redisson's RLock on redis-py (articles 000 and 001).

The lock is one key, ``"<hold count>:<holder>"`` where a holder is
``<process id>:<thread token>``, so the same thread may re-enter it and must release
as often as it acquired (scenario S8). Redisson keeps a hash ``{holder: count}``; a
string is taken, leased and read in one ``SET NX PX GET``, which the hash cannot be.

Failure semantics:

- Without an explicit ``lease_ms`` the lock's TTL is ``watchdog_timeout_ms`` (30 s)
  and a watchdog thread renews it every third of that while this process holds it:
  a slow holder keeps the lock, a dead process loses it within one timeout.
- With ``lease_ms`` there is no watchdog: the lock expires after the lease however
  long the holder works; its release then raises :class:`LockNotOwnedError`.
- Waiters sleep until a wake-up or the lock's TTL, whichever is first, then try
  again: no fixed-interval polling. A release wakes one waiter in all: a process
  with waiters is listed in Redis and listens on a channel of its own, and the
  release publishes to one listed process (the one listed longest ago, which goes
  to the back), which wakes one of its waiters. Redisson publishes on one channel
  that every process hears, and each wakes a waiter: most find the lock taken again.
- A release lost on the wire is retried once with the same request id; the unlock
  latch makes the retry answer as the first attempt did instead of releasing twice.
- An acquire whose reply is lost may have taken the lock: that hold is left to its
  lease, and the thread takes the lock under a new name from then on, so that its
  next acquisition is not a re-entry into it.
"""

from __future__ import annotations

import os
import threading
import uuid
from typing import Any

import redis

from ...base import BaseLock, Deadline, thread_token
from ...exceptions import LockNotOwnedError
from .base import UNREACHABLE, RedisLockBackend, reply_number, reply_pair
from .wakeups import ANYONE, Listing, Wakeups
from .watchdog import Watchdog

# Wakes one waiter of the process it is sent to (fair: one named waiter in all).
UNLOCK_MESSAGE = ANYONE
# Long enough for a retried release to find the first one's answer.
UNLOCK_LATCH_MS = 10_000

_process_id = uuid.uuid4().hex[:12]


def _new_process_id() -> None:
    global _process_id
    _process_id = uuid.uuid4().hex[:12]


# Forked workers must not share holder names, or one could release (and re-enter)
# another's lock. The hook runs in the child before any of its threads exist; a
# lazy "pid changed?" check would race between a new process's first threads.
os.register_at_fork(after_in_child=_new_process_id)


def process_id() -> str:
    """A random id for this process (a new one after a fork)."""
    return _process_id


class RedissonLock(BaseLock):
    unavailable = UNREACHABLE
    channel: str  # set by the locks whose waiters ask again at each message (_wait_asking)

    def __init__(self, name: str, *, backend: RedissonLockBackend, lease_ms: int | None = None,
                 wait_timeout: float | None = None):
        super().__init__(name, wait_timeout=wait_timeout)
        self.backend = backend
        self.lease_ms = None if lease_ms is None else int(lease_ms)
        # {name} is a hash tag: the key, the waiting list and the latches land in one
        # cluster slot.
        prefix = backend.key_prefix
        self.key = f"{prefix}{{{name}}}"
        self.waiting_key = f"{prefix}waiting:{{{name}}}"
        # Each waiting process's channel is this and its process id.
        self.channel_prefix = f"{prefix}channel:{{{name}}}:"
        self._latch_prefix = f"{prefix}unlock_latch:{{{name}}}:"
        self.fence_key = f"{prefix}fence:{{{name}}}"
        self._fences = threading.local()  # this thread's holding's fencing token

    # --- holder and lease --------------------------------------------------------

    def holder(self) -> str:
        """This thread's name as a holder of this lock: the process and the thread (as
        Redisson's ``UUID:threadId``), and after a release of this lock failed here, a
        round number: see ``do_release``."""
        holder = f"{process_id()}:{thread_token()}"
        round_ = self.backend.holder_round(self.key)
        return f"{holder}:{round_}" if round_ else holder

    @property
    def _lease(self) -> int:
        return self.lease_ms if self.lease_ms is not None else self.backend.watchdog.timeout_ms

    def _acquire_script(self, holder: str, *, waiting: bool) -> tuple[int, int | None]:
        """Run the acquire script once: (1, fencing token) or (0, the lock's TTL).
        (``waiting`` is for the fair lock's line: this lock's answer says who holds
        it whatever the asker means to do.)"""
        return reply_pair(self.backend.script["redisson_acquire"](keys=[self.key, self.fence_key],
                                                                  args=[self._lease, holder]))

    def _try_acquire(self, holder: str, *, waiting: bool = False) -> int | None:
        """One attempt: None if acquired, else the lock's remaining TTL in ms.
        ``waiting``: this holder will wait if it is not taken."""
        try:
            taken, value = self._acquire_script(holder, waiting=waiting)
        except UNREACHABLE:
            # The script may have run and its reply been lost: a hold nobody knows of,
            # left to its lease. This thread's next acquisition must not re-enter it
            # (it would be watched, and its release would leave the count at one,
            # renewed for as long as the process lives): as after a failed release,
            # the thread takes the lock under a new name from now on. Unless it holds
            # the lock already: then it is that hold's name, and its release needs it.
            if not self.backend.watchdog.watching(self.key, holder):
                self.backend.retire_holder(self.key)
            raise
        if not taken:
            return value
        self._fences.fence = value
        if self.lease_ms is None:
            self._watch(holder)
        return None

    def _watch(self, holder: str) -> None:
        """Have the watchdog renew this holding until its final release."""
        self.backend.watchdog.watch(self.key, holder)

    @property
    def fence(self) -> int | None:
        return getattr(self._fences, "fence", None)

    # --- protocol ---------------------------------------------------------------------

    # Waits for the release's pub/sub message (or the holder's lease to run out),
    # as Redisson does: no polling.
    def do_acquire(self, *, blocking: bool, timeout: float | None) -> bool:
        holder = self.holder()
        if self._try_acquire(holder) is None:
            return True
        if not blocking:
            return False
        deadline = Deadline(timeout)
        # Subscribed and listed first, then try again: a release between the failed
        # attempt and the listing would otherwise wake nobody here.
        with self.backend.wakeups.subscribed(self.wake_channel(), listing=self._listing()) as sub:
            ttl = self._try_acquire(holder, waiting=True)
            while ttl is not None:
                if deadline.passed():
                    return False
                # ttl -1 would be a key without expiry, set by something else:
                # look again in a second rather than sleep forever.
                if sub.wait(deadline.cap(ttl / 1000 if ttl >= 0 else 1.0)):
                    # Woken by a release. A releaser that asks again at once has
                    # often taken it back already: a plain PTTL tells in one command
                    # and gives the next sleep; the script asks only when it is free.
                    ttl = self.backend.client.pttl(self.key)
                    if ttl != -2:
                        continue
                elif not deadline.passed():
                    # No wake-up within the lock's TTL: if Redis lost its list (a
                    # restart), this process is listed again. (A wait that ran out
                    # is about to give up: nothing to list.)
                    self._list_process()
                ttl = self._try_acquire(holder, waiting=True)
            return True

    def wake_channel(self) -> str:
        """This process's channel for this lock's wake-ups."""
        return f"{self.channel_prefix}{process_id()}"

    def _listing(self) -> Listing:
        return Listing(join=self._list_process, leave=self._unlist_process, forward=self._wake_one)

    def _list_process(self) -> None:
        self.backend.script["redisson_list"](keys=[self.waiting_key], args=[process_id()])

    def _unlist_process(self) -> None:
        self.backend.client.lrem(self.waiting_key, 0, process_id())

    def _wake_one(self) -> None:
        """Wake one waiter in another process if the lock is free."""
        self.backend.script["redisson_wake"](keys=[self.key, self.waiting_key],
                                             args=[self.channel_prefix, UNLOCK_MESSAGE])

    # --- waiting that asks again (the fair lock, the read-write lock) ---------------------

    # Whether a release's message names the waiter it wakes (the fair lock's).
    addressed = False

    def _wait_asking(self, *, blocking: bool, timeout: float | None) -> bool:
        """An acquire whose every ask may change the lock's state (join a line, mark
        a writer waiting): the first ask says whether it waits, then it asks again
        at each message or at ``_sleep_s`` of the last answer, and ``_give_up``
        undoes what the asks left when it stops without the lock."""
        holder = self.holder()
        if self._try_acquire(holder, waiting=blocking) is None:
            return True
        if not blocking:
            return False
        deadline = Deadline(timeout)
        address = holder if self.addressed else None
        taken = False
        try:
            # Subscribed, ask again: a release between the first ask and the
            # subscription would otherwise go unheard until the next ask.
            with self.backend.wakeups.subscribed(self.channel, address=address) as sub:
                while (ttl := self._try_acquire(holder, waiting=True)) is not None:
                    if deadline.passed():
                        return False
                    sub.wait(deadline.cap(self._sleep_s(ttl)), address=address)
                taken = True
                return True
        finally:
            if not taken:
                self._give_up(holder)

    def _sleep_s(self, ttl_ms: int) -> float:
        """How long a waiter sleeps at most when no message comes: the lock's TTL,
        or a second for a key without one (set by something else)."""
        return ttl_ms / 1000 if ttl_ms >= 0 else 1.0

    def _give_up(self, holder: str) -> None:
        """A waiting acquire stops without the lock (timed out or failed)."""

    def do_release(self) -> None:
        holder = self.holder()
        latch = f"{self._latch_prefix}{uuid.uuid4().hex}"
        try:
            try:
                result = self._release_script(holder, latch, retry=False)
            except (redis.ConnectionError, redis.TimeoutError):
                # The reply may be what was lost, not the release: the latch tells.
                result = self._release_script(holder, latch, retry=True)
        except redis.RedisError:
            # The release may not have reached Redis, which may still hold the lock
            # (restarted from its AOF with it): leave it to its lease. As Redisson's
            # unlock does whatever its outcome, no more renewals for it; and unlike
            # Redisson, this thread takes the lock under a new name from now on, or its
            # next acquisition (its next request) would count as a re-entry into the
            # abandoned hold, whose release would then leave it held, renewed for as
            # long as this process lives.
            self.backend.watchdog.unwatch(self.key, holder)
            self.backend.retire_holder(self.key)
            self._fences.fence = None
            raise
        if result is None:
            self._fences.fence = None
            raise LockNotOwnedError("lock is not held by this thread (expired, released, or "
                                    "never acquired)", lock_name=self.name)
        if result == 1:
            self.backend.watchdog.unwatch(self.key, holder)
            self._fences.fence = None

    def _release_script(self, holder: str, latch: str, *, retry: bool) -> int | None:
        """Run the release script once: None (not held), 0 (holds remain), 1 (released)."""
        return reply_number(self.backend.script["redisson_release"](
            keys=[self.key, latch, self.waiting_key],
            args=[self._lease, holder, UNLOCK_LATCH_MS, int(retry), self.channel_prefix, UNLOCK_MESSAGE,
                  int(self.lease_ms is not None)]))

    def locked(self) -> bool:
        return bool(self.backend.client.exists(self.key))

    # --- Redisson's extras ------------------------------------------------------------

    def owned(self) -> bool:
        """Held by this thread."""
        return self.hold_count() > 0

    def hold_count(self) -> int:
        """How many times this thread holds it (0 when it doesn't)."""
        value = self.backend.client.get(self.key)
        count, _, holder = (value or b"").decode().partition(":")
        return int(count) if holder == self.holder() else 0

    def ttl_ms(self) -> int:
        """The lock's remaining time to live in ms; -2 when free."""
        return int(self.backend.client.pttl(self.key))

    def force_release(self) -> bool:
        """Delete the lock whoever holds it and wake a waiter; True if it was held."""
        self.backend.watchdog.unwatch(self.key)
        return bool(self.backend.script["redisson_force_release"](
            keys=[self.key, self.waiting_key], args=[self.channel_prefix, UNLOCK_MESSAGE]))


class RedissonLockBackend(RedisLockBackend):
    """OPTIONS: ``url``, ``key_prefix``, ``lease_ms`` (None: watchdog),
    ``watchdog_timeout_ms`` (30000), ``wait_timeout`` seconds."""

    lock_class: type[RedissonLock] = RedissonLock
    scripts: tuple[str, ...] = ("redisson_acquire", "redisson_release", "redisson_renew",
                                "redisson_force_release", "redisson_wake", "redisson_list")
    renew_script = "redisson_renew"

    def __init__(self, alias: str, options: dict[str, Any]):
        options = dict(options)
        watchdog_timeout_ms = options.pop("watchdog_timeout_ms", 30_000)
        super().__init__(alias, options)
        self.watchdog = Watchdog(self.script[self.renew_script], watchdog_timeout_ms, backend=alias)
        self.wakeups = Wakeups(self.client, standing_channel=f"{self.key_prefix}wakeups")
        self._rounds = threading.local()  # per thread: lock key -> holds abandoned

    def holder_round(self, key: str) -> int:
        """How many holds of ``key`` this thread abandoned (a release that failed)."""
        by_key: dict[str, int] = getattr(self._rounds, "by_key", {})
        return by_key.get(key, 0)

    def retire_holder(self, key: str) -> None:
        by_key = self._rounds.__dict__.setdefault("by_key", {})
        by_key[key] = by_key.get(key, 0) + 1

    def lock(self, name: str) -> RedissonLock:
        return self.lock_class(name, backend=self, wait_timeout=self.wait_timeout, **self.options)

    def close(self) -> None:
        self.watchdog.stop()
        self.wakeups.close()
        super().close()
