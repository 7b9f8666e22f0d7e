"""The SET NX PX lock against a real Redis."""

from __future__ import annotations

import threading
import time

import pytest

from common.testing import in_thread
from locking import LockNotOwnedError


def test_acquire_sets_the_key_with_a_token_and_ttl(setnx, redis_client):
    lock = setnx(ttl_ms=5000).lock("s")
    assert lock.acquire()
    assert redis_client.get(lock.key) == lock.token.encode()
    assert 4000 < redis_client.pttl(lock.key) <= 5000
    assert lock.locked() and lock.owned()
    lock.release()
    assert not lock.locked() and not redis_client.exists(lock.key)


def test_held_lock_excludes_another_holder(setnx):
    backend = setnx()
    lock = backend.lock("s")
    lock.acquire()
    assert in_thread(lambda: backend.lock("s").acquire(blocking=False)) is False
    # The same lock object in another thread is another holder too.
    assert in_thread(lambda: lock.acquire(blocking=False)) is False
    assert in_thread(lock.owned) is False
    lock.release()
    assert in_thread(lambda: backend.lock("s").acquire(blocking=False)) is True


def test_each_holder_gets_its_own_token(setnx):
    lock = setnx().lock("s")
    lock.acquire()
    first = lock.token
    lock.release()
    lock.acquire()
    assert lock.token != first
    lock.release()


def test_release_after_the_key_was_overwritten_raises_and_leaves_it(setnx, redis_client):
    lock = setnx().lock("s")
    lock.acquire()
    redis_client.set(lock.key, "someone-else", px=10_000)  # expired and retaken meanwhile
    with pytest.raises(LockNotOwnedError) as caught:
        lock.release()
    assert caught.value.lock_name == "s"
    assert redis_client.get(lock.key) == b"someone-else"


def test_the_key_expires_after_its_ttl_if_the_holder_never_releases(setnx):
    backend = setnx(ttl_ms=200)
    backend.lock("s").acquire()  # and the holder "dies"
    time.sleep(0.35)
    assert backend.lock("s").acquire(blocking=False)


def test_blocking_acquire_polls_until_the_wait_timeout(setnx):
    backend = setnx(retry_interval=0.05)
    holder = backend.lock("s")
    holder.acquire()
    started = time.monotonic()
    assert in_thread(lambda: backend.lock("s").acquire(timeout=1)) is False
    assert 0.95 <= time.monotonic() - started < 5.0  # its timeout, with a slow machine's slack
    holder.release()


def test_a_waiter_gets_the_lock_within_a_retry_interval_of_its_release(setnx):
    backend = setnx(retry_interval=0.05)
    holder = backend.lock("s")
    holder.acquire()
    got = {}

    def waiter():
        assert backend.lock("s").acquire(timeout=10)
        got["at"] = time.monotonic()

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)
    released = time.monotonic()
    holder.release()
    t.join()
    assert got["at"] - released < 0.5
