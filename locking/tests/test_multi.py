"""Several names as one lock (``lock_many``) on every backend without a native one:
the real Redis and ZooKeeper, and the process-local lock."""

import threading
import time

import pytest

from common.testing import start_thread
from locking import LockUnavailableError
from locking.backends.local import LocalLockBackend
from locking.base import MultiLock
from stack.scratch import free_port

# Its backends are asked for by name (getfixturevalue): conftest.py cannot see them.
pytestmark = pytest.mark.server


@pytest.fixture(params=["setnx", "redisson", "zookeeper", "local"])
def backend(request):
    """A backend of each kind, with a 10 s wait."""
    if request.param == "local":
        return LocalLockBackend("test", {"wait_timeout": 10})
    make = request.getfixturevalue({"zookeeper": "zk"}.get(request.param, request.param))
    return make(wait_timeout=10)


def test_one_name_is_the_plain_lock(backend):
    lock = backend.lock_many(["stock:a", "stock:a"])
    assert not isinstance(lock, MultiLock) and lock.name == "stock:a"


def test_names_are_deduplicated_sorted_and_all_held(backend):
    lock = backend.lock_many(["stock:c", "stock:a", "stock:c", "stock:b"])
    assert [part.name for part in lock.locks] == ["stock:a", "stock:b", "stock:c"]
    assert lock.acquire()
    for name in ("stock:a", "stock:b", "stock:c"):
        assert not in_another_thread(lambda name=name: backend.lock(name).acquire(blocking=False))
    lock.release()
    assert in_another_thread(lambda: try_and_release(backend.lock("stock:b")))


def test_overlapping_holders_in_opposite_orders_both_finish(backend):
    barrier = threading.Barrier(2)

    def buyer(names):
        lock = backend.lock_many(names)
        barrier.wait()
        assert lock.acquire()
        time.sleep(0.2)
        lock.release()

    a, box_a = start_thread(lambda: buyer(["stock:a", "stock:b"]))
    b, box_b = start_thread(lambda: buyer(["stock:b", "stock:a"]))
    a.join(30)
    b.join(30)
    assert "error" not in box_a and "error" not in box_b, (box_a, box_b)


def test_all_or_nothing_a_name_held_elsewhere_gives_back_the_ones_taken(backend):
    blocker = backend.lock("stock:b")
    holding, done = threading.Event(), threading.Event()

    def hold():
        assert blocker.acquire()
        holding.set()
        done.wait(10)
        blocker.release()

    holder, _ = start_thread(hold)
    assert holding.wait(10)
    try:
        lock = backend.lock_many(["stock:a", "stock:b"])
        started = time.monotonic()
        assert not lock.acquire(timeout=0.3)
        assert time.monotonic() - started >= 0.3  # one deadline for all the names
        # stock:a was taken, then given back when stock:b did not come.
        assert in_another_thread(lambda: try_and_release(backend.lock("stock:a")))
    finally:
        done.set()
        holder.join()


def in_another_thread(fn):
    thread, box = start_thread(fn)
    thread.join(30)
    if "error" in box:
        raise box["error"]
    return box["value"]


def try_and_release(lock) -> bool:
    got = lock.acquire(blocking=False)
    if got:
        lock.release()
    return got


@pytest.mark.parametrize("kind", ["setnx", "redisson"])
def test_a_redis_lock_whose_server_is_gone_is_unavailable_not_a_crash(request, kind):
    make = request.getfixturevalue(kind)
    backend = make(url=f"redis://127.0.0.1:{free_port()}/0", wait_timeout=1)  # nothing listens
    with pytest.raises(LockUnavailableError) as caught:
        backend.lock("stock:a").acquire()
    assert caught.value.lock_name == "stock:a"
    with pytest.raises(LockUnavailableError):
        backend.lock_many(["stock:a", "stock:b"]).acquire()
