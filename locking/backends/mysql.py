"""``mysql`` and ``mysql-for-update``: locks that are rows of the database the work
is written to (article 000), held by the transaction they are taken in.

The first lock a thread takes opens a transaction on its database connection; every
lock it takes while that is open joins it, and the transaction commits when the
thread's last lock is released. The caller's own ``transaction.atomic()`` inside
becomes a savepoint, so the work commits in the same COMMIT that frees the lock:
it can never be released before the work is visible. A rollback, or a connection
that dies, releases too.

- ``mysql``: INSERT the name into a UNIQUE-keyed table; a second holder's INSERT
  waits on the first's uncommitted row, for at most the session's
  ``innodb_lock_wait_timeout``, set to the wait timeout (only when the connection's
  value differs: every statement under the lock counts). The holder DELETEs the row
  before committing, so the waiter's INSERT then goes through.
- ``mysql-for-update``: ``SELECT ... FOR UPDATE`` on a row per name, created once.

Several names at once (``lock_many``) are de-duplicated and taken in sorted order,
so two holders of overlapping sets cannot deadlock each other. A name the thread
already holds is counted, not taken again (reentrant per thread).

Snapshot: nothing here reads a table without locking it, so under REPEATABLE READ
the transaction's snapshot is taken by the caller's first read, after the lock.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import DatabaseError, OperationalError, connections, transaction
from django.db.backends.utils import CursorWrapper
from MySQLdb.constants import ER

from ..base import BaseLock, BaseLockBackend, Deadline
from ..exceptions import LockCommitUnknownError, LockError, LockNotOwnedError, LockReleaseError
from ..models import LockClaim, LockRow

logger = logging.getLogger(__name__)

# MariaDB's ceiling for innodb_lock_wait_timeout: "wait forever".
FOREVER_SECONDS = 1_073_741_824
# Pause after the n-th deadlock: uniform in [0, min(cap, base * 2**n)] seconds.
DEADLOCK_BACKOFF_BASE = 0.002
DEADLOCK_BACKOFF_CAP = 0.1


def wait_at_most(cursor: CursorWrapper, using: str, deadline: Deadline) -> None:
    """Make the session wait for row locks until ``deadline`` at most (whole seconds,
    the variable's unit). The value stays for the session's later statements too (the
    purchase's own, which should not wait longer either), and is remembered on the
    connection, so a session already set pays no round trip; a new connection (a
    reconnect) starts from the server's default again."""
    left = deadline.left()
    seconds = FOREVER_SECONDS if left is None else math.ceil(left)
    raw = connections[using].connection
    if getattr(raw, "flashsale_lock_wait", None) != seconds:
        cursor.execute("SET SESSION innodb_lock_wait_timeout = %s", [seconds])
        raw.flashsale_lock_wait = seconds


@contextmanager
def side_connection(using: str) -> Iterator[CursorWrapper]:
    """A cursor on a connection of its own, in autocommit, outside this thread's
    transaction and unaffected by it."""
    side = connections[using].copy()
    try:
        with side.cursor() as cursor:
            yield cursor
    finally:
        side.close()


class _RowMissing(Exception):
    """The lock row to lock does not exist (yet, or any more)."""


class _Holdings(threading.local):
    """Per thread: names held and how often, the transaction holding them, and the
    id of each name's claim row (``InsertLock``)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.atomic: transaction.Atomic | None = None
        self.claims: dict[str, int] = {}


def _error_code(e: DatabaseError) -> int | None:
    return e.args[0] if e.args and isinstance(e.args[0], int) else None


class MySQLLock(BaseLock):
    commits_work = True

    def __init__(self, names: Iterable[str], *, backend: MySQLLockBackend,
                 wait_timeout: float | None = None):
        self.names = sorted(set(names))
        super().__init__(",".join(self.names), wait_timeout=wait_timeout)
        self.backend = backend

    # --- mechanism, per strategy ------------------------------------------------

    def take(self, cursor: CursorWrapper, name: str) -> None:
        raise NotImplementedError("subclasses of MySQLLock must provide a take() method")

    def give_back(self, cursor: CursorWrapper, name: str) -> None:
        """Undo ``take`` before the commit, if it left anything behind."""

    def prepare(self, names: list[str]) -> None:
        """Work that must be done outside the holder's transaction, before it."""

    def forget(self, names: list[str]) -> None:
        """What ``prepare`` remembered about ``names`` is stale."""

    # --- protocol ---------------------------------------------------------------

    # The database waits: the locking read queues on the row lock until it is
    # released or innodb_lock_wait_timeout (set from the deadline) passes.
    def do_acquire(self, *, blocking: bool, timeout: float | None) -> bool:
        held = self.backend.holdings
        new = [n for n in self.names if not held.counts.get(n)]
        if new:
            wait = 0 if not blocking else timeout
            if not self._take_all(new, Deadline(wait)):
                return False
        for name in self.names:
            held.counts[name] = held.counts.get(name, 0) + 1
        return True

    def _take_all(self, names: list[str], deadline: Deadline) -> bool:
        held = self.backend.holdings
        self.prepare(names)
        deadlocks = 0
        while True:
            opened = held.atomic is None
            if opened:
                atomic = transaction.atomic(using=self.backend.using)
                # Remembered only once entered: an Atomic whose BEGIN failed (the
                # database down) would pass for an open transaction to every later
                # lock of this thread, and each would fail on it.
                atomic.__enter__()
                held.atomic = atomic
            try:
                # Inside a transaction that holds other names, a savepoint, so a failed
                # attempt leaves it usable; in the one just opened, none is needed (a
                # failure ends it): two statements fewer under the lock.
                with transaction.atomic(using=self.backend.using, savepoint=not opened), \
                        connections[self.backend.using].cursor() as cursor:
                    wait_at_most(cursor, self.backend.using, deadline)
                    for name in names:
                        self.take(cursor, name)
                return True
            except _RowMissing as e:
                # Roll back first: the failed locking read left a gap lock that
                # would block the row's creation on the side connection.
                self._end_if(opened, e)
                if not opened:
                    raise LockError("a lock row went missing while other names were held",
                                    lock_name=self.name) from e
                self.forget(names)
                self.prepare(names)
            except OperationalError as e:
                code = _error_code(e)
                if code == ER.LOCK_DEADLOCK and not opened:
                    # InnoDB rolled back the whole transaction, names held before included.
                    self._abandon()
                    raise LockError("deadlock while taking more names; the transaction holding "
                                    "this thread's other locks was rolled back",
                                    lock_name=self.name) from e
                self._end_if(opened, e)
                if code == ER.LOCK_WAIT_TIMEOUT:
                    return False
                if code != ER.LOCK_DEADLOCK:
                    raise
                # Waiters queued on one uncommitted INSERT deadlock each other when
                # it goes away: each was granted a shared lock on the duplicate key
                # and each now wants it exclusive. The victim held nothing else, so
                # it tries again, after a random pause so the survivors can finish
                # instead of deadlocking with it again at once.
                deadlocks += 1
                logger.info("deadlock %d taking %s; retrying", deadlocks, self.name)
                pause = random.uniform(0, min(DEADLOCK_BACKOFF_CAP, DEADLOCK_BACKOFF_BASE * 2 ** deadlocks))
                if deadline.cap(pause) < pause:  # it would end while pausing
                    return False
                time.sleep(pause)
            except BaseException as e:
                self._end_if(opened, e)
                raise

    def _end_if(self, opened: bool, error: BaseException) -> None:
        """Roll back the transaction this attempt opened (it holds nothing)."""
        held = self.backend.holdings
        if opened and held.atomic is not None:
            atomic, held.atomic = held.atomic, None
            atomic.__exit__(type(error), error, error.__traceback__)

    def _abandon(self) -> None:
        held = self.backend.holdings
        atomic, held.atomic = held.atomic, None
        held.counts.clear()
        held.claims.clear()
        if atomic is not None:
            err = LockError("abandoned")
            atomic.__exit__(type(err), err, None)

    def do_release(self) -> None:
        held = self.backend.holdings
        if any(not held.counts.get(n) for n in self.names):
            raise LockNotOwnedError("lock is not held by this thread", lock_name=self.name)
        last = [n for n in self.names if held.counts[n] == 1]
        # Work that failed without a savepoint of its own marked the transaction for
        # rollback: the rollback gives the names back, no DELETE needed (nor allowed).
        connection = connections[self.backend.using]
        failed = connection.needs_rollback
        try:
            if last and not failed:
                with connection.cursor() as cursor:
                    for name in last:
                        self.give_back(cursor, name)
            for name in self.names:
                held.counts[name] -= 1
                if not held.counts[name]:
                    del held.counts[name]
                    held.claims.pop(name, None)  # rolled back with the transaction, if not given back
        except DatabaseError as e:
            # A deadlock victim (names next to each other in the unique index share
            # gap locks) or a lost connection: InnoDB rolled the transaction back,
            # work and locks alike (a connection that dies before COMMIT commits
            # nothing). End it here, or the thread's connection stays inside a broken
            # transaction and every later request on it fails.
            try:
                self._abandon()
            except DatabaseError:
                pass  # reconnecting failed too (the server is down): nothing to end here
            raise LockReleaseError("releasing failed and the transaction holding the lock, "
                                   "with the work done under it, was rolled back",
                                   lock_name=self.name) from e
        if held.counts:
            return
        atomic, held.atomic = held.atomic, None
        assert atomic is not None  # entered with the first name this thread holds
        try:
            atomic.__exit__(None, None, None)  # COMMIT (or the rollback): work and release at once
        except DatabaseError as e:
            held.counts.clear()
            held.claims.clear()
            # The COMMIT failed, or the connection died around it (Django's reconnect
            # after a failed COMMIT, or its SET autocommit after a good one): whether
            # the work landed, only the database knows now.
            raise LockCommitUnknownError("the COMMIT that releases the lock failed: the work may "
                                         "or may not have been committed", lock_name=self.name) from e
        if failed:
            # Django rolled back without a word: whoever thinks its work is done must hear it.
            raise LockReleaseError("the work under the lock had failed: its transaction was rolled "
                                   "back, the lock released", lock_name=self.name)

    def held_names(self) -> dict[str, int]:
        """Names this thread holds, with counts (for tests and figures)."""
        return dict(self.backend.holdings.counts)


class _RowsMadeOnce(MySQLLock):
    """A lock whose names need a row made before the holder's transaction, and kept:
    made in autocommit on a side connection, once per name per process."""

    # (database, name) whose row this process has seen made, so the side connection
    # is paid once per name per process.
    _known: set[tuple[str, str]]
    row_sql = ""  # INSERT IGNORE of one name's row

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._known = set()

    def prepare(self, names: list[str]) -> None:
        missing = [n for n in names if (self.backend.using, n) not in self._known]
        if not missing:
            return
        # In autocommit on a side connection: an INSERT IGNORE inside the holder's
        # transaction would keep a shared lock on an existing row, and two holders
        # upgrading theirs would deadlock.
        with side_connection(self.backend.using) as cursor:
            for name in missing:
                cursor.execute(self.row_sql, [name])
        self._known.update((self.backend.using, n) for n in missing)

    def forget(self, names: list[str]) -> None:
        self._known.difference_update((self.backend.using, n) for n in names)


class InsertLock(_RowsMadeOnce):
    """Article 000's lock table: the holder's uncommitted claim row is the lock. Each
    name's floor row (``LockClaim``) is made once, before the first claim: it keeps
    the gap locks of one name's claim away from the next name's."""

    table = LockClaim._meta.db_table
    row_sql = f"INSERT IGNORE INTO {table} (name, slot) VALUES (%s, {LockClaim.FLOOR})"

    def take(self, cursor: CursorWrapper, name: str) -> None:
        cursor.execute(f"INSERT INTO {self.table} (name, slot) VALUES (%s, {LockClaim.CLAIM})", [name])
        self.backend.holdings.claims[name] = cursor.lastrowid

    def give_back(self, cursor: CursorWrapper, name: str) -> None:
        # By its primary key: the row's own lock, which the holder has. Found by name,
        # the DELETE would also lock the claims of earlier holders that InnoDB keeps
        # delete-marked until purge, with the gaps before them, where this name's
        # waiters hold theirs: a deadlock at release.
        claim = self.backend.holdings.claims.pop(name, None)
        if claim is None:
            cursor.execute(f"DELETE FROM {self.table} WHERE name = %s AND slot = {LockClaim.CLAIM}", [name])
        else:
            cursor.execute(f"DELETE FROM {self.table} WHERE id = %s", [claim])

    def locked(self) -> bool:
        # A holder's row is uncommitted: only a READ UNCOMMITTED reader sees it.
        with side_connection(self.backend.using) as cursor:
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
            placeholders = ",".join(["%s"] * len(self.names))
            cursor.execute(f"SELECT COUNT(*) FROM {self.table} WHERE slot = {LockClaim.CLAIM} "
                           f"AND name IN ({placeholders})", self.names)
            return bool(cursor.fetchone()[0] > 0)


class ForUpdateLock(_RowsMadeOnce):
    table = LockRow._meta.db_table
    row_sql = f"INSERT IGNORE INTO {table} (name) VALUES (%s)"

    def take(self, cursor: CursorWrapper, name: str) -> None:
        cursor.execute(f"SELECT id FROM {self.table} WHERE name = %s FOR UPDATE", [name])
        if cursor.fetchone() is None:  # the table was emptied since we created it
            raise _RowMissing(name)

    def locked(self) -> bool:
        with side_connection(self.backend.using) as cursor:
            placeholders = ",".join(["%s"] * len(self.names))
            cursor.execute("START TRANSACTION")
            try:
                cursor.execute(f"SELECT id FROM {self.table} WHERE name IN ({placeholders}) "
                               "FOR UPDATE NOWAIT", self.names)
                return False
            except OperationalError as e:
                if _error_code(e) == ER.LOCK_WAIT_TIMEOUT:
                    return True
                raise
            finally:
                cursor.execute("ROLLBACK")


class MySQLLockBackend(BaseLockBackend):
    """OPTIONS: ``using`` (the database alias, "default"), ``wait_timeout`` seconds
    (rounded up to whole seconds: innodb_lock_wait_timeout's unit)."""

    lock_class: type[_RowsMadeOnce] = InsertLock
    server = "database"  # the stock's own: a readiness check asks it anyway

    def __init__(self, alias: str, options: dict[str, Any]):
        super().__init__(alias, options)
        self.using = self.options.pop("using", "default")
        self.holdings = _Holdings()

    def lock(self, name: str) -> MySQLLock:
        return self.lock_class([name], backend=self, wait_timeout=self.wait_timeout)

    def lock_many(self, names: Iterable[str]) -> MySQLLock:
        """One lock over several names (a multi-item purchase)."""
        return self.lock_class(names, backend=self, wait_timeout=self.wait_timeout)


class InsertLockBackend(MySQLLockBackend):
    lock_class = InsertLock


class ForUpdateLockBackend(MySQLLockBackend):
    lock_class = ForUpdateLock
