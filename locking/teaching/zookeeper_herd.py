"""BROKEN ON PURPOSE: article 002's first ZooKeeper lock, with the herd effect.

Every contender tries to create the one ephemeral node ``<root>/<name>``; those
that fail watch it, and when it is deleted *every* waiter is woken to race for it
again, though only one can win. With n waiters a release costs n wake-ups and the
whole queue about n²/2, where the recipe in ``locking.backends.zookeeper`` (each
waiter watches only its predecessor) costs one per release. ``wakeups("herd")``
counts them.

Otherwise correct (ephemeral node, freed when the session ends): the defect is
cost under contention, not mutual exclusion. ``watching(lock)`` says how many of
this process's waiters watch a lock's node now: the herd its release wakes.
"""

from __future__ import annotations

import threading
import time
from urllib.parse import quote

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import WatchedEvent

from ..backends.zookeeper import ZooKeeperLockBackend, count_wakeup
from ..base import BaseLock
from ..exceptions import LockNotOwnedError

_watching: dict[str, int] = {}  # node path -> this process's waiters watching it now
_watching_mutex = threading.Lock()


def _watch_counted(path: str, change: int) -> None:
    with _watching_mutex:
        _watching[path] = _watching.get(path, 0) + change


def watching(lock: HerdEffectZooKeeperLock) -> int:
    """How many of this process's waiters watch ``lock``'s node now."""
    with _watching_mutex:
        return _watching.get(lock.path, 0)


class HerdEffectZooKeeperLock(BaseLock):
    def __init__(self, name: str, *, backend: ZooKeeperLockBackend, wait_timeout: float | None = None):
        super().__init__(name, wait_timeout=wait_timeout)
        self.backend = backend
        self.path = f"{backend.root}/herd/{quote(name, safe='')}"
        self._held = False

    def do_acquire(self, *, blocking: bool, timeout: float | None) -> bool:
        client = self.backend.client
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                client.create(self.path, ephemeral=True, makepath=True)
                self._held = True
                return True
            except NodeExistsError:
                pass
            if not blocking:
                return False
            woken = threading.Event()

            def on_change(event: WatchedEvent, woken: threading.Event = woken) -> None:
                count_wakeup("herd")
                woken.set()

            if client.exists(self.path, watch=on_change) is None:
                continue  # deleted between our create and our watch: try again now
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            _watch_counted(self.path, 1)
            try:
                if not woken.wait(left):
                    return False
            finally:
                _watch_counted(self.path, -1)

    def do_release(self) -> None:
        if not self._held:
            raise LockNotOwnedError("lock is not held by this lock object", lock_name=self.name)
        self._held = False
        try:
            self.backend.client.delete(self.path)
        except NoNodeError as e:
            raise LockNotOwnedError("the node was already gone", lock_name=self.name) from e

    def locked(self) -> bool:
        return self.backend.client.exists(self.path) is not None


class HerdEffectZooKeeperLockBackend(ZooKeeperLockBackend):
    # Another lock on the same session, not a ZooKeeperLock: only the session is shared.
    def lock(self, name: str) -> HerdEffectZooKeeperLock:  # type: ignore[override]
        return HerdEffectZooKeeperLock(name, backend=self, wait_timeout=self.wait_timeout)
