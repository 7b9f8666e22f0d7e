"""The lock protocol every strategy implements, shaped like ``threading.Lock``.

Public methods hold the policy (argument checks, default wait timeout, context
manager); subclasses provide the mechanism in ``do_acquire``/``do_release``, the way
redis-py splits ``acquire``/``do_acquire``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from prometheus_client import Counter

from . import metrics
from .exceptions import LockLostError, LockNotAcquiredError, LockNotOwnedError, LockUnavailableError

# Not threading.get_ident(): Python hands a finished thread's ident to the next
# thread, which would then own (re-enter, release) a hold the finished one left
# behind. Java never reuses a thread id within a JVM's life; a token lives and dies
# with its thread the same way.
_thread = threading.local()


def thread_token() -> str:
    """A random id for the calling thread, never a finished thread's: how a lock
    names the thread that holds it."""
    token: str | None = getattr(_thread, "token", None)
    if token is None:
        token = _thread.token = uuid.uuid4().hex[:12]
    return token


class Deadline:
    """When a wait gives up: ``timeout`` seconds from now, or never (``None``). The
    one place the backends' wait loops do that arithmetic."""

    def __init__(self, timeout: float | None):
        self._at = None if timeout is None else time.monotonic() + timeout

    def left(self) -> float | None:
        """Seconds left (never below 0); None when the wait never ends."""
        return None if self._at is None else max(self._at - time.monotonic(), 0.0)

    def passed(self) -> bool:
        return self._at is not None and time.monotonic() >= self._at

    def cap(self, pause: float) -> float:
        """``pause``, cut to what is left."""
        left = self.left()
        return pause if left is None else min(pause, left)


class BaseLock:
    """A named mutual-exclusion lock.

    :param name: what is being protected, e.g. ``"stock:sku-1"``; locks with equal
        names exclude each other, within whatever scope the backend covers.
    :param wait_timeout: seconds a blocking ``acquire()`` waits by default;
        ``None`` waits forever.
    """

    # False for a lock that excludes nobody (the null lock of the lockless
    # strategies): holding it says nothing about who may touch the resource.
    exclusive = True
    # True for a lock whose release commits the transaction the holder's work
    # joined (the MySQL locks): the work is done only once the release succeeded.
    commits_work = False
    # What the backend's client raises when its server cannot be reached; acquire()
    # turns it into LockUnavailableError, one error for every backend.
    unavailable: tuple[type[BaseException], ...] = ()
    # The settings.LOCKING alias the lock was built from (``get_lock`` names it): the
    # label of its metrics.
    backend_alias = "unconfigured"

    def __init__(self, name: str, *, wait_timeout: float | None = None):
        self.name = name
        self.wait_timeout = wait_timeout

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock; return whether it was taken.

        ``blocking=False`` tries once. ``timeout=-1`` waits for the lock's
        ``wait_timeout`` (forever when that is ``None``); another value overrides it.
        """
        wait: float | None = timeout
        if not blocking:
            if timeout != -1:
                raise ValueError("can't specify a timeout for a non-blocking call")
        elif timeout == -1:
            wait = self.wait_timeout
        elif timeout < 0:
            raise ValueError("timeout value must be a non-negative number or -1")
        asked = time.perf_counter()
        try:
            got = self.do_acquire(blocking=blocking, timeout=wait if blocking else None)
        except self.unavailable as e:
            self._counted(metrics.ACQUISITIONS, "unavailable")
            raise LockUnavailableError(f"the server of lock {self.name!r} cannot be reached: {e}",
                                       lock_name=self.name) from e
        if self.exclusive:
            if got:
                granted = time.perf_counter()
                self._holds().append(granted)
                metrics.timed(metrics.WAIT_SECONDS, self.backend_alias, granted - asked)
            self._counted(metrics.ACQUISITIONS, "acquired" if got else "timed_out" if blocking else "refused")
        return got

    def release(self) -> None:
        """Release the lock; :class:`LockNotOwnedError` if this holder doesn't hold it."""
        try:
            self.do_release()
        except LockNotOwnedError:
            self._counted(metrics.LOSSES, "at_release")
            raise
        finally:
            holds = self._holds()
            if holds:
                metrics.timed(metrics.HOLD_SECONDS, self.backend_alias, time.perf_counter() - holds.pop())

    def ensure_held(self) -> None:
        """Raise :class:`LockLostError` if this backend knows the lock was lost since
        it was acquired. Call it last thing before committing work done under it.

        A lock that cannot tell (most can't, cheaply) returns quietly: this narrows
        the window, it does not replace fencing.
        """
        try:
            self.do_ensure_held()
        except LockLostError:
            self._counted(metrics.LOSSES, "before_commit")
            raise

    def do_ensure_held(self) -> None:
        """Raise :class:`LockLostError` if the lock is known lost; the backend's check."""

    def _holds(self) -> list[float]:
        """When the calling thread's holds of this lock began, the latest last (a
        reentrant lock is held several times over)."""
        by_thread: dict[str, list[float]] = self.__dict__.setdefault("_holds_by_thread", {})
        return by_thread.setdefault(thread_token(), [])

    def _counted(self, counter: Counter, *labels: str) -> None:
        if self.exclusive:
            metrics.count(counter, self.backend_alias, *labels)

    def fence_of(self, name: str) -> int | None:
        """The fencing token of the holding of ``name``, one of the names this lock
        covers (a lock over several names holds one token per name)."""
        return self.fence if name == self.name else None

    @property
    def fence(self) -> int | None:
        """The fencing token of this thread's current holding, or ``None`` if the
        backend hands out none (or the lock is not held).

        Tokens grow with every acquisition of the same name, so a resource that
        remembers the highest token it has seen can refuse a write from a holder
        whose lock expired and went to someone newer (scenario S17).
        """
        return None

    def locked(self) -> bool:
        """Whether anyone holds the lock (as far as this backend can see)."""
        raise NotImplementedError("subclasses of BaseLock must provide a locked() method")

    def do_acquire(self, *, blocking: bool, timeout: float | None) -> bool:
        """Wait by polling: one try, then a pause and another, until the lock is taken
        or the deadline has passed. A backend whose server can say when the lock is
        free (a pub/sub message, a ZooKeeper watch, a row lock the database waits on)
        waits for that instead, in a ``do_acquire`` of its own."""
        deadline = Deadline(timeout)
        while not self.try_acquire():
            if not blocking or deadline.passed():
                return False
            time.sleep(deadline.cap(self.retry_pause()))
        return True

    def try_acquire(self) -> bool:
        """One attempt, never waiting: whether the lock was taken."""
        raise NotImplementedError("subclasses of BaseLock must provide try_acquire() or do_acquire()")

    def retry_pause(self) -> float:
        """How long a polling wait sleeps between two tries."""
        raise NotImplementedError("subclasses of BaseLock that poll must provide retry_pause()")

    def do_release(self) -> None:
        raise NotImplementedError("subclasses of BaseLock must provide a do_release() method")

    def __enter__(self) -> BaseLock:
        if self.acquire():
            return self
        raise LockNotAcquiredError(
            f"could not acquire lock within {self.wait_timeout}s", lock_name=self.name
        )

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


# Several names held as one lock, for any backend (article 000's multi-key rule): the
# names are de-duplicated and taken in sorted order, so two holders of overlapping
# sets always contend on the same first name and cannot deadlock each other
# (scenario S12 shows what unsorted keys do). All or nothing: a name not had before
# the shared deadline gives back the ones taken so far. Released in reverse order.
# A backend whose locks join one another natively (the MySQL locks: one
# transaction) has its own ``lock_many``.
class MultiLock(BaseLock):
    def __init__(self, locks: list[BaseLock], *, wait_timeout: float | None = None):
        self.locks = sorted({lock.name: lock for lock in locks}.values(), key=lambda lock: lock.name)
        super().__init__(",".join(lock.name for lock in self.locks), wait_timeout=wait_timeout)
        self.unavailable = tuple({error for lock in self.locks for error in lock.unavailable})

    def do_acquire(self, *, blocking: bool, timeout: float | None) -> bool:
        deadline = Deadline(timeout)
        taken: list[BaseLock] = []
        try:
            for lock in self.locks:
                if not blocking:
                    got = lock.do_acquire(blocking=False, timeout=None)
                else:
                    got = lock.do_acquire(blocking=True, timeout=deadline.left())
                if not got:
                    self._give_back(taken)
                    return False
                taken.append(lock)
        except BaseException:
            self._give_back(taken)  # what could not be given back, its lease frees
            raise
        return True

    def do_release(self) -> None:
        error = self._give_back(self.locks)
        if error is not None:
            raise error

    @staticmethod
    def _give_back(locks: list[BaseLock]) -> Exception | None:
        """Release each, the last taken first; every one is tried. Returns the first error."""
        first_error = None
        for lock in reversed(locks):
            try:
                lock.do_release()  # measured as the one lock they make
            except Exception as e:  # noqa: BLE001 - the others must still be released
                first_error = first_error or e
        return first_error

    def do_ensure_held(self) -> None:
        for lock in self.locks:
            lock.do_ensure_held()

    @property
    def fence(self) -> int | None:
        """``None``: tokens of different names are not comparable; ``fence_of(name)``
        gives each name's own."""
        return None

    def fence_of(self, name: str) -> int | None:
        return next((lock.fence for lock in self.locks if lock.name == name), None)

    def locked(self) -> bool:
        return any(lock.locked() for lock in self.locks)


class BaseLockBackend:
    """Builds locks of one kind; one instance per ``settings.LOCKING`` alias per
    process, so shared resources (connection pools, clients) live here.

    :param alias: the ``settings.LOCKING`` key this backend was built for.
    :param options: the alias's ``OPTIONS`` dict; ``wait_timeout`` is common to all.
    """

    lock_class: type[BaseLock] = BaseLock
    # The server these locks live on, as a readiness check names it ("redis",
    # "zookeeper", "database"); None for locks kept in the process, or none at all.
    server: str | None = None

    def __init__(self, alias: str, options: dict[str, Any]):
        self.alias = alias
        self.options = dict(options)
        self.wait_timeout: float | None = self.options.pop("wait_timeout", None)

    def check(self, timeout: float) -> None:
        """Raise unless the locks' server answers within ``timeout`` seconds, asked
        on a connection kept for it; nothing to ask for locks kept in the process."""

    def lock(self, name: str) -> BaseLock:
        return self.lock_class(name, wait_timeout=self.wait_timeout, **self.options)

    def lock_many(self, names: Iterable[str]) -> BaseLock:
        """One lock over several names (an order that needs several resources):
        de-duplicated and taken in sorted order, so holders of overlapping sets
        cannot deadlock. One name is just that name's lock."""
        unique = sorted(set(names))
        if len(unique) == 1:
            return self.lock(unique[0])
        return MultiLock([self.lock(name) for name in unique], wait_timeout=self.wait_timeout)

    def close(self) -> None:
        """Release shared resources; called when settings change (tests) and at exit."""
