"""The stock locks of a purchase: their names, and their release after the
transaction, where a failure may decide what the buyer hears."""

from __future__ import annotations

import logging

from django.conf import settings

from common.errors import Busy, OutcomeUnknown, Unavailable
from common.strategies import StrategySpec
from inventory.services import Fence
from locking import BaseLock, LockCommitUnknownError, LockError, LockReleaseError, LockUnavailableError

from .models import Order

logger = logging.getLogger(__name__)


def lock_name(sku: str, segment: int, segments: int) -> str:
    # A product in one segment keeps the product's own lock name.
    return f"stock:{sku}" if segments == 1 else f"stock:{sku}:{segment}"


def locks_acquired(lock: BaseLock, names: dict[int, str], *, strategy: StrategySpec,
                   sku: str) -> dict[int, Fence] | None:
    """Acquire ``lock`` (the stock locks of ``names``, segment -> lock name) for work
    beside the purchases (a return, a late payment's units): the fences to write with,
    one per segment, when fencing is on and the lock issues them.

    :raises Unavailable: the lock's server cannot be reached.
    :raises Busy: not acquired within its wait timeout.
    """
    try:
        acquired = lock.acquire()
    except LockUnavailableError as e:
        raise Unavailable("the stock lock's server cannot be reached", backend=strategy.name) from e
    if not acquired:
        raise Busy(f"stock lock for {sku} not acquired within its wait timeout")
    return lock_fences(lock, names, strategy=strategy)


def lock_fences(lock: BaseLock, names: dict[int, str], *, strategy: StrategySpec) -> dict[int, Fence] | None:
    """The fences a holder of ``lock`` writes with, one per segment of ``names``:
    None when fencing is off or the lock issues no token for one of them."""
    if not settings.FLASHSALE_FENCING:
        return None
    fences = {}
    for segment, name in names.items():
        token = lock.fence_of(name)
        if token is None:  # a lock that issues none: nothing to fence with
            return None
        fences[segment] = Fence(source=strategy.name, token=token)
    return fences


def lock_release(lock: BaseLock, *, written: Order | None) -> None:
    """Release after the transaction ended (``written``: the order it committed, or
    for a lock whose release commits, is about to; ``None`` after a failure). A lock
    that was no longer ours changes nothing now: after a commit, say so loudly
    (mutual exclusion may have been broken); after a failure, the failure is what
    the caller needs to hear. A lock whose release is the commit (the MySQL locks)
    failing to release means the purchase was rolled back, or, if the connection
    died during the COMMIT, that nobody here knows: that the buyer must hear. Any
    other failure to release (the lock's server gone) changes nothing already
    decided: logged, not raised."""
    try:
        lock.release()
    except Exception as e:
        if written is not None and lock.commits_work:
            if isinstance(e, LockReleaseError) and not isinstance(e, LockCommitUnknownError):
                raise Busy("the purchase was rolled back as its lock was released; nothing was written",
                           extra={"lock": lock.name}) from e
            # The release was the commit, and it did not say it committed: only the
            # database knows now.
            raise outcome_unknown_error(written) from e
        _release_failed(lock, e, committed=written is not None)


def _release_failed(lock: BaseLock, e: Exception, *, committed: bool) -> None:
    if isinstance(e, LockReleaseError):
        logger.info("%s: release failed after a failed purchase: %s", lock, e)
    elif isinstance(e, LockError):
        if committed:
            logger.warning("%s was not held at release, after the purchase committed: %s", lock, e)
        else:
            logger.info("%s was not held at release, after a failed purchase: %s", lock, e)
    else:
        # The lock's server went away (a Redis or ZooKeeper connection error). The
        # purchase's outcome is decided already, and the buyer must hear that, not
        # this: the lease (or the session) frees the lock on its own.
        logger.error("%s: release failed (%s: %s); the lock frees itself when its lease ends",
                     lock, type(e).__name__, e)


def outcome_unknown_error(order: Order) -> OutcomeUnknown:
    return OutcomeUnknown("the database connection died during the commit: whether the order was "
                          "placed is unknown; retry with the same Idempotency-Key to learn it",
                          order_id=order.pk)
