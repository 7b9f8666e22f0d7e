"""The broken-on-purpose GETSET lock does what article 004 claims for it, when the
clocks agree; the scenario S14 shows what it does when they don't."""

import time

from locking.teaching.redis_naive import GetsetExpiryLock


def test_a_live_lock_is_not_taken_over(redis_client, key_prefix):
    key = f"{key_prefix}getset"
    a, b = (GetsetExpiryLock(redis_client, key, lease_ms=5000) for _ in range(2))
    assert a.acquire()
    assert not b.acquire()
    assert a.release() and not redis_client.exists(key)


def test_an_expired_lock_is_taken_over_once_when_clocks_agree(redis_client, key_prefix):
    key = f"{key_prefix}getset"
    a = GetsetExpiryLock(redis_client, key, lease_ms=100)
    assert a.acquire()
    time.sleep(0.15)
    b, c = (GetsetExpiryLock(redis_client, key, lease_ms=5000) for _ in range(2))
    assert [b.acquire(), c.acquire()] == [True, False]
    assert not a.release()  # by A's own clock its lease is over: it leaves the key alone
    assert redis_client.exists(key)
