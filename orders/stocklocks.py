"""The stock locks of a sale: their names, their holding around the work that moves
the stock (a purchase, an expiry's or a refund's return, a late payment's units
taken again), and their release after it, where a failure may decide what the
caller hears."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

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


class CommitFailed(Exception):  # noqa: N818 (what happened to the work, not a fault of the caller's)
    """The release of a lock whose release is the commit (the MySQL locks) failed
    after the work: rolled back, or (``unknown``) nobody here knows whether it
    committed. The holder says what that means to its caller."""

    def __init__(self, lock: BaseLock, cause: Exception):
        super().__init__(f"{lock}: the commit, the lock's release, failed ({cause})")
        self.unknown = not isinstance(cause, LockReleaseError) or isinstance(cause, LockCommitUnknownError)


class Holding:
    """What the block of ``stock_locks_held`` writes with (``fences``, one per
    segment, or None), and what it tells the release (``committed``)."""

    def __init__(self, fences: dict[int, Fence] | None):
        self.fences = fences
        self.work_done = False

    def committed(self) -> None:
        """The block's work has committed, or, under a lock whose release is the
        commit, is to commit with the release: a failed release is the caller's news."""
        self.work_done = True


@contextmanager
def stock_locks_held(lock: BaseLock, names: dict[int, str], *, strategy: StrategySpec, sku: str,
                     deadline: float | None = None) -> Iterator[Holding]:
    """Hold ``lock`` (the stock locks of ``names``, segment -> lock name) for the block,
    waiting no later than ``deadline`` (``time.monotonic()``; None: the lock's wait
    timeout alone), then release it, whatever happened there: after a failure, the
    failure is what the caller hears (a failed release is logged); after the block's work committed
    (``Holding.committed``), a failed release that was the commit raises
    ``CommitFailed``, and any other is logged (the work is decided, and the lock's
    lease or session frees it).

    :raises Unavailable: the lock's server cannot be reached; nothing was written.
    :raises Busy: not acquired within its wait timeout, or by the deadline; nothing was written.
    :raises CommitFailed: see above.
    """
    wait = -1.0  # the lock's own wait timeout
    if deadline is not None:
        # A purchase's answer is due by its deadline (nginx answers 504 soon after, an
        # outcome its client cannot know): a wait that began late ends there, busy.
        left = max(deadline - time.monotonic(), 0.0)
        wait = left if lock.wait_timeout is None else min(lock.wait_timeout, left)
    try:
        acquired = lock.acquire(timeout=wait)
    except LockUnavailableError as e:
        raise Unavailable("the stock lock's server cannot be reached; nothing was written",
                          backend=strategy.name) from e
    if not acquired:
        raise Busy(f"stock lock for {sku} not acquired within its wait timeout or the deadline",
                   extra={"strategy": strategy.name})
    try:
        holding = Holding(lock_fences(lock, names, strategy=strategy))
        yield holding
    except BaseException:
        try:
            lock.release()
        except Exception as e:
            _release_failed(lock, e, committed=False)
        raise
    try:
        lock.release()
    except Exception as e:
        if holding.work_done and lock.commits_work:
            raise CommitFailed(lock, e) from e
        _release_failed(lock, e, committed=holding.work_done)


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


def _release_failed(lock: BaseLock, e: Exception, *, committed: bool) -> None:
    """A release that failed and changes nothing already decided: said in the log. A
    lock no longer ours after the work committed may have let another holder in."""
    if isinstance(e, LockReleaseError):
        logger.info("%s: release failed after failed work: %s", lock, e)
    elif isinstance(e, LockError):
        if committed:
            logger.warning("%s was not held at release, after the work committed: %s", lock, e)
        else:
            logger.info("%s was not held at release, after failed work: %s", lock, e)
    else:
        # The lock's server went away (a Redis or ZooKeeper connection error). The
        # work's outcome is decided already, and the caller must hear that, not
        # this: the lease (or the session) frees the lock on its own.
        logger.error("%s: release failed (%s: %s); the lock frees itself when its lease ends",
                     lock, type(e).__name__, e)


def outcome_unknown_error(order: Order) -> OutcomeUnknown:
    return OutcomeUnknown("the database connection died during the commit: whether the order was "
                          "placed is unknown; retry with the same Idempotency-Key to learn it",
                          order_id=order.pk)
