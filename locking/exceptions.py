"""Lock errors. Each carries the lock's name, so a log line says which lock failed."""

from django.core.exceptions import ImproperlyConfigured


class LockError(Exception):
    def __init__(self, message: str, *, lock_name: str | None = None):
        super().__init__(message)
        self.lock_name = lock_name


class LockNotAcquiredError(LockError):
    """``with lock:`` could not get the lock within its wait timeout."""


class LockNotOwnedError(LockError):
    """Release (or renewal) of a lock this holder does not hold: never acquired,
    already released, or expired and taken by someone else."""


class LockLostError(LockError):
    """The backend knows the lock stopped being held while its holder was working
    (a ZooKeeper session expired): work done under it must not be committed."""


class LockUnavailableError(LockError):
    """The lock's server cannot be reached (refused, timed out, connection lost):
    whether the lock is free is unknown, so it was not taken."""


class LockReleaseError(LockError):
    """Releasing failed in a way that undid the holding's work: a lock whose release
    commits the transaction the work joined (``commits_work``) could not commit."""


class LockCommitUnknownError(LockReleaseError):
    """The connection died during the COMMIT that releases the lock (``commits_work``):
    whether the work was committed is unknown to the holder. Only the database knows."""


class InvalidLockBackendError(ImproperlyConfigured):
    """``settings.LOCKING`` names an alias or backend that does not exist."""


class LockUpgradeError(LockError):
    """A holder of a read lock asked for the write lock of the same name. Waiting for
    it would mean waiting for its own read hold to end: refused at once instead
    (Redisson's read-write lock hangs there). Release the read lock first."""
