"""The MySQL locks (unique-key INSERT, SELECT ... FOR UPDATE) on the real MariaDB.
Each test thread has its own database connection, so these are real transactions
competing for real row locks."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from common.testing import held_elsewhere, in_thread, start_thread
from inventory.models import Stock
from locking import LockNotOwnedError, LockReleaseError
from locking.backends.mysql import ForUpdateLockBackend, InsertLockBackend

pytestmark = pytest.mark.django_db(transaction=True)

BACKENDS = [InsertLockBackend, ForUpdateLockBackend]


@pytest.fixture(params=BACKENDS, ids=["mysql", "mysql-for-update"])
def backend_cls(request):
    return request.param


def make(backend_cls, **options):
    return backend_cls("test", {"using": "default", **options})


def test_two_holders_of_one_name_serialize(backend_cls):
    backend = make(backend_cls, wait_timeout=10)
    events = []
    first_in = threading.Event()

    def holder(tag, hold):
        lock = backend.lock("stock:x")
        assert lock.acquire()
        events.append((tag, "in", time.monotonic()))
        first_in.set()
        time.sleep(hold)
        events.append((tag, "out", time.monotonic()))
        lock.release()

    a, _ = start_thread(lambda: holder("a", 0.5))
    first_in.wait(5)
    b, box = start_thread(lambda: holder("b", 0))
    a.join()
    b.join()
    assert "error" not in box
    assert [e[:2] for e in events] == [("a", "in"), ("a", "out"), ("b", "in"), ("b", "out")]


def test_lock_wait_timeout_gives_false_after_the_wait(backend_cls):
    backend = make(backend_cls, wait_timeout=1)
    with held_elsewhere(lambda: backend.lock("stock:x")):
        started = time.monotonic()
        assert backend.lock("stock:x").acquire() is False
        waited = time.monotonic() - started
        assert backend.lock("stock:x").acquire(blocking=False) is False
    assert 0.9 <= waited < 3
    assert not connection.in_atomic_block  # the failed attempt left no transaction open
    lock = backend.lock("stock:x")
    assert lock.acquire(blocking=False)
    lock.release()


def test_a_holder_whose_connection_dies_releases(backend_cls):
    backend = make(backend_cls, wait_timeout=10)
    holding = threading.Event()

    def crashing_holder():
        backend.lock("stock:x").acquire()
        holding.set()
        time.sleep(0.3)
        connection.close()  # the process dies: the server rolls back, and the lock goes

    t, _ = start_thread(crashing_holder)
    holding.wait(5)
    lock = backend.lock("stock:x")
    started = time.monotonic()
    assert lock.acquire()
    assert time.monotonic() - started < 5
    lock.release()
    t.join()


def test_nested_acquire_in_one_thread_does_not_deadlock(backend_cls):
    backend = make(backend_cls, wait_timeout=2)
    outer, inner = backend.lock("stock:x"), backend.lock("stock:x")
    assert outer.acquire()
    with CaptureQueriesContext(connection) as queries:
        assert inner.acquire()
    assert len(queries) == 0  # counted in the thread's holdings: no locking read to queue on the outer
    assert outer.held_names() == {"stock:x": 2}
    inner.release()
    assert connection.in_atomic_block  # still held: not committed yet
    outer.release()
    assert not connection.in_atomic_block
    with pytest.raises(LockNotOwnedError):
        outer.release()


def test_overlapping_multi_key_holders_in_opposite_orders_both_finish(backend_cls):
    backend = make(backend_cls, wait_timeout=10)
    barrier = threading.Barrier(2)

    def buyer(names):
        lock = backend.lock_many(names)
        barrier.wait()
        assert lock.acquire()
        time.sleep(0.3)
        lock.release()
        return lock.names

    a, box_a = start_thread(lambda: buyer(["stock:a", "stock:b", "stock:a"]))
    b, box_b = start_thread(lambda: buyer(["stock:b", "stock:a"]))
    a.join()
    b.join()
    assert "error" not in box_a and "error" not in box_b, (box_a, box_b)
    assert box_a["value"] == box_b["value"] == ["stock:a", "stock:b"]  # de-duplicated, sorted


def test_the_waiter_reads_the_stock_the_holder_committed(backend_cls, product_factory):
    """REPEATABLE READ: the waiter's transaction began before the holder committed;
    its snapshot must still be taken after it got the lock, or it reads stale stock."""
    product = product_factory(stock=10)
    backend = make(backend_cls, wait_timeout=10)
    holding = threading.Event()

    def holder():
        lock = backend.lock("stock:x")
        lock.acquire()
        holding.set()
        time.sleep(0.3)  # the waiter is now inside its transaction, waiting
        Stock.objects.filter(product=product).update(quantity=7)
        lock.release()  # commits the update

    t, _ = start_thread(holder)
    holding.wait(5)
    lock = backend.lock("stock:x")
    assert lock.acquire()
    assert connection.in_atomic_block
    seen = Stock.objects.get(product=product).quantity
    lock.release()
    t.join()
    assert seen == 7


def test_locked_is_seen_from_other_threads(backend_cls):
    backend = make(backend_cls, wait_timeout=2)
    lock = backend.lock("stock:x")
    assert not lock.locked()
    lock.acquire()
    t, box = start_thread(lambda: backend.lock("stock:x").locked())
    t.join()
    lock.release()
    assert box["value"] is True
    assert not lock.locked()


def test_a_release_that_cannot_commit_rolls_the_work_back_and_leaves_the_thread_usable(backend_cls,
                                                                                     product_factory):
    """The release is the commit: if it fails (here the connection is killed under
    it; in a sale, a deadlock victim), the work is gone and the caller must hear it."""
    backend = make(backend_cls, wait_timeout=10)
    product = product_factory(sku="rolled-back", stock=5)
    lock = backend.lock("stock:x")
    assert lock.acquire()
    Stock.objects.filter(product=product).update(quantity=4)  # the work, under the lock
    with connection.cursor() as cursor:
        cursor.execute("SELECT CONNECTION_ID()")
        [holder_id] = cursor.fetchone()
    in_thread(lambda: _kill(holder_id))
    with pytest.raises(LockReleaseError):
        lock.release()
    assert not connection.in_atomic_block and lock.held_names() == {}
    assert Stock.objects.get(product=product).quantity == 5  # rolled back
    _gone(holder_id)  # the server's own end of the killed session, its row lock with it
    again = backend.lock("stock:x")  # the thread's next purchase works: nothing left broken
    assert again.acquire(blocking=False)
    again.release()


def _kill(connection_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("KILL CONNECTION %s", [connection_id])


def _gone(connection_id: int, within: float = 30) -> None:
    """Once the server has ended the killed session: KILL only marks it, and on a
    busy machine its rollback still holds its locks when the client hears of it."""
    deadline = time.monotonic() + within
    with connection.cursor() as cursor:
        while True:
            cursor.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s",
                           [connection_id])
            if cursor.fetchone()[0] == 0:
                return
            assert time.monotonic() < deadline, f"connection {connection_id} still there after {within} s"
            time.sleep(0.05)


def test_a_lock_taken_while_the_database_is_down_leaves_the_thread_usable_once_it_is_back(
        backend_cls, monkeypatch):
    from django.db import OperationalError

    backend = make(backend_cls, wait_timeout=5)
    connection.close()
    monkeypatch.setitem(connection.settings_dict, "PORT", 1)  # nothing listens: the database is down
    with pytest.raises(OperationalError):
        backend.lock("stock:x").acquire()
    monkeypatch.undo()  # back: this thread's next lock opens a transaction of its own
    lock = backend.lock("stock:x")
    assert lock.acquire()
    assert connection.in_atomic_block
    lock.release()
    assert not connection.in_atomic_block and not lock.locked()


def test_holders_of_names_next_to_each_other_never_deadlock_at_release():
    """A product's segments are names next to each other in the lock table's index
    (stock:t:0, stock:t:1, …). Each name's floor row keeps the gap locks of one
    name's claim away from its neighbours', so a release (a DELETE of the holder's
    own claim, then COMMIT) has nothing to wait for and can never be a deadlock's
    victim; nor can the claims of earlier holders of its own name, which InnoDB keeps
    delete-marked until purge: the release deletes its claim by its primary key.
    Before, 8 names × 4 threads here lost 60-99 of 800 releases to deadlocks, and
    with the floors alone 0-1."""
    backend = make(InsertLockBackend, wait_timeout=10)
    names, rounds = [f"stock:t:{n}" for n in range(8)], 25
    lost, taken = [], []

    def holder(name):
        for _ in range(rounds):
            lock = backend.lock(name)
            assert lock.acquire()
            try:
                lock.release()
                taken.append(name)
            except LockReleaseError as e:
                lost.append(e)

    started = [start_thread(lambda name=name: holder(name)) for name in names for _ in range(4)]
    for thread, _ in started:
        thread.join(120)
    assert [box["error"] for _, box in started if "error" in box] == []
    assert lost == []
    assert len(taken) == len(names) * 4 * rounds
