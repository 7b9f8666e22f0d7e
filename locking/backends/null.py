"""No lock at all: ``acquire`` always succeeds at once.

Used by strategies whose protection lies elsewhere (``atomic``'s conditional
UPDATE) or nowhere (``none``, to watch oversell happen).
"""

from ..base import BaseLock, BaseLockBackend


class NullLock(BaseLock):
    exclusive = False

    # Takes nothing, so never waits.
    def do_acquire(self, *, blocking: bool, timeout: float | None) -> bool:
        return True

    def do_release(self) -> None:
        pass

    def locked(self) -> bool:
        return False


class NullLockBackend(BaseLockBackend):
    lock_class = NullLock
