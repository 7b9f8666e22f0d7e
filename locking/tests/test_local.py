import threading
import time

import pytest

from locking import LockNotAcquiredError, LockNotOwnedError
from locking.backends.local import LocalLock, LocalLockBackend


def backend(**options) -> LocalLockBackend:
    return LocalLockBackend("local", options)


def test_same_name_same_lock_across_lock_objects():
    a, b = backend().lock("stock:x"), backend().lock("stock:x")
    assert a.acquire()
    assert b.locked()
    assert not b.acquire(blocking=False)
    a.release()
    assert b.acquire(blocking=False)
    b.release()


def test_different_names_do_not_exclude():
    a, b = backend().lock("stock:a"), backend().lock("stock:b")
    assert a.acquire() and b.acquire(blocking=False)
    a.release()
    b.release()


def test_threads_never_overlap_in_the_critical_section():
    inside, overlaps, total = 0, 0, 0
    guard = threading.Lock()  # only to count; the lock under test does the excluding

    def worker():
        nonlocal inside, overlaps, total
        lock = backend().lock("stock:threads")
        for _ in range(50):
            with lock:
                with guard:
                    inside += 1
                    overlaps += inside > 1
                time.sleep(0.0005)  # widen the window an overlap would need
                with guard:
                    inside -= 1
                    total += 1

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert total == 400
    assert overlaps == 0


def test_blocking_acquire_times_out_and_returns_false():
    holder = backend().lock("stock:timeout")
    holder.acquire()
    waiter = backend().lock("stock:timeout")
    result = []
    t = threading.Thread(target=lambda: result.append(waiter.acquire(timeout=0.2)))
    started = time.monotonic()
    t.start()
    t.join()
    assert result == [False]
    assert time.monotonic() - started >= 0.2
    holder.release()


def test_context_manager_raises_when_wait_timeout_passes():
    holder = backend().lock("stock:ctx")
    holder.acquire()
    errors = []

    def contend():
        try:
            with backend(wait_timeout=0.05).lock("stock:ctx"):
                pass
        except LockNotAcquiredError as e:
            errors.append(e)

    t = threading.Thread(target=contend)
    t.start()
    t.join()
    holder.release()
    assert len(errors) == 1 and errors[0].lock_name == "stock:ctx"


def test_release_by_another_thread_raises_not_owned():
    lock = backend().lock("stock:owner")
    lock.acquire()
    errors = []

    def steal():
        try:
            lock.release()
        except LockNotOwnedError as e:
            errors.append(e)

    t = threading.Thread(target=steal)
    t.start()
    t.join()
    assert len(errors) == 1
    assert lock.locked()  # still held by its owner
    lock.release()
    assert not lock.locked()


def test_release_without_acquire_raises():
    with pytest.raises(LockNotOwnedError):
        LocalLock("stock:never").release()


def test_argument_checks_match_threading_lock():
    lock = LocalLock("stock:args")
    with pytest.raises(ValueError):
        lock.acquire(blocking=False, timeout=1)
    with pytest.raises(ValueError):
        lock.acquire(timeout=-2)
