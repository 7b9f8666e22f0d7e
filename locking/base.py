"""The lock protocol every strategy implements, shaped like ``threading.Lock``.

Public methods hold the policy (argument checks, default wait timeout, context
manager); subclasses provide the mechanism in ``do_acquire``/``do_release``, the way
redis-py splits ``acquire``/``do_acquire``.
"""

from __future__ import annotations

from typing import Any

from .exceptions import LockNotAcquiredError


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

    def __init__(self, name: str, *, wait_timeout: float | None = None):
        self.name = name
        self.wait_timeout = wait_timeout

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock; return whether it was taken.

        ``blocking=False`` tries once. ``timeout=-1`` waits for the lock's
        ``wait_timeout`` (forever when that is ``None``); another value overrides it.
        """
        if not blocking:
            if timeout != -1:
                raise ValueError("can't specify a timeout for a non-blocking call")
            return self.do_acquire(blocking=False, timeout=None)
        if timeout == -1:
            timeout = self.wait_timeout
        elif timeout < 0:
            raise ValueError("timeout value must be a non-negative number or -1")
        return self.do_acquire(blocking=True, timeout=timeout)

    def release(self) -> None:
        """Release the lock; :class:`LockNotOwnedError` if this holder doesn't hold it."""
        self.do_release()

    def ensure_held(self) -> None:
        """Raise :class:`LockLostError` if this backend knows the lock was lost since
        it was acquired. Call it last thing before committing work done under it.

        A lock that cannot tell (most can't, cheaply) returns quietly: this narrows
        the window, it does not replace fencing.
        """

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
        raise NotImplementedError("subclasses of BaseLock must provide a do_acquire() method")

    def do_release(self) -> None:
        raise NotImplementedError("subclasses of BaseLock must provide a do_release() method")

    def __enter__(self) -> BaseLock:
        if self.acquire():
            return self
        raise LockNotAcquiredError(
            f"could not acquire lock within {self.wait_timeout}s", lock_name=self.name
        )

    def __exit__(self, exc_type, exc, tb) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class BaseLockBackend:
    """Builds locks of one kind; one instance per ``settings.LOCKING`` alias per
    process, so shared resources (connection pools, clients) live here.

    :param alias: the ``settings.LOCKING`` key this backend was built for.
    :param options: the alias's ``OPTIONS`` dict; ``wait_timeout`` is common to all.
    """

    lock_class: type[BaseLock] = BaseLock

    def __init__(self, alias: str, options: dict[str, Any]):
        self.alias = alias
        self.options = dict(options)
        self.wait_timeout: float | None = self.options.pop("wait_timeout", None)

    def lock(self, name: str) -> BaseLock:
        return self.lock_class(name, wait_timeout=self.wait_timeout, **self.options)

    def close(self) -> None:
        """Release shared resources; called when settings change (tests) and at exit."""
