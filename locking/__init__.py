"""Lock strategies and nothing else: this package imports nothing from the
inventory or orders apps, so any of its locks can guard any critical section."""

from .base import BaseLock, BaseLockBackend
from .exceptions import (
    InvalidLockBackendError,
    LockCommitUnknownError,
    LockError,
    LockLostError,
    LockNotAcquiredError,
    LockNotOwnedError,
    LockReleaseError,
    LockUnavailableError,
    LockUpgradeError,
)
from .handler import get_lock, get_locks, locks

__all__ = [
    "BaseLock",
    "BaseLockBackend",
    "InvalidLockBackendError",
    "LockCommitUnknownError",
    "LockError",
    "LockLostError",
    "LockNotAcquiredError",
    "LockNotOwnedError",
    "LockReleaseError",
    "LockUnavailableError",
    "LockUpgradeError",
    "get_lock",
    "get_locks",
    "locks",
]
