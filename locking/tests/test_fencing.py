"""Fencing tokens: every lock that hands them out, against the real servers. A token
must grow with each acquisition of a name, whoever acquires it."""

from __future__ import annotations

import pytest

from common.testing import in_thread


@pytest.fixture(params=["setnx", "redisson", "zookeeper"])
def backend(request, setnx, redisson, zk):
    return {"setnx": setnx, "redisson": redisson, "zookeeper": zk}[request.param]()


def test_tokens_grow_with_each_acquisition_by_any_holder(backend):
    lock = backend.lock("fenced")
    assert lock.fence is None  # not held: no token

    def take_and_release() -> int:
        other = backend.lock("fenced")
        assert other.acquire(timeout=5)
        fence = other.fence
        other.release()
        return fence

    tokens = []
    for _ in range(3):
        assert lock.acquire(timeout=5)
        tokens.append(lock.fence)
        lock.release()
        assert lock.fence is None
        tokens.append(in_thread(take_and_release))  # another thread is another holder
    assert all(isinstance(t, int) for t in tokens), tokens
    assert tokens == sorted(set(tokens)), tokens


def test_another_name_has_its_own_tokens(backend):
    # Tokens only order holders of one name: the stock row compares its own lock's.
    a, b = backend.lock("one"), backend.lock("two")
    assert a.acquire(timeout=5) and b.acquire(timeout=5)
    assert a.fence is not None and b.fence is not None
    a.release()
    b.release()


def test_redisson_re_entry_keeps_the_holdings_token(redisson):
    lock = redisson().lock("fenced")
    assert lock.acquire()
    first = lock.fence
    assert lock.acquire()
    assert lock.fence == first
    lock.release()
    assert lock.fence == first  # still held once
    lock.release()
    assert lock.fence is None


@pytest.mark.parametrize("kind", ["setnx", "redisson"])
def test_redis_tokens_keep_growing_after_the_counter_is_lost(kind, setnx, redisson, redis_client):
    """A Redis without persistence forgets the counter when it restarts; the next
    token, seeded from the server's clock, is still larger than any before."""
    lock = {"setnx": setnx, "redisson": redisson}[kind]().lock("fenced")
    for _ in range(50):
        lock.acquire()
        lock.release()
    assert lock.acquire()
    before = lock.fence
    lock.release()
    redis_client.delete(lock.fence_key)  # what a restart without persistence does
    assert lock.acquire()
    assert lock.fence > before
    lock.release()
