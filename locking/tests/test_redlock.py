"""Redlock over three real, independent redis-servers started for this module, and
the ``setnx`` lock's ``replicas`` option against a real master and replica."""

from __future__ import annotations

import pytest

from common.testing import in_thread
from locking import LockNotOwnedError
from locking.backends.redis.redlock import RedlockBackend
from locking.backends.redis.setnx import SetnxLockBackend
from stack.scratch import redis_servers, start_redis

pytestmark = pytest.mark.server  # it starts servers of its own

# The backend's own timeout a master (50 ms) is there so that a dead master costs
# little; on a loaded machine a live one misses it now and then, and a vote lost so
# would test the machine's speed, not the algorithm. The master these tests lose is
# killed, and refuses at once.
PATIENT = {"socket_timeout": 2.0}


@pytest.fixture(scope="module")
def masters():
    with redis_servers(3) as servers:
        yield servers


@pytest.fixture
def redlock(masters):
    made = []

    def make(**options):
        backend = RedlockBackend("test", {"urls": [m.url for m in masters], **PATIENT, **options})
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
    for m in masters:
        if m.process.poll() is None:
            m.client().flushall()


def test_acquire_sets_the_same_token_with_a_ttl_on_every_master(redlock, masters):
    lock = redlock(ttl_ms=5000).lock("r")
    assert lock.acquire()
    assert lock.votes == 3 and 0 < lock.validity_ms < 5000
    for m in masters:
        assert m.client().get(lock.key) == lock.token.encode()
        assert 4000 < m.client().pttl(lock.key) <= 5000
    lock.release()
    assert not any(m.client().exists(lock.key) for m in masters)


def test_a_held_lock_excludes_another_holder(redlock):
    backend = redlock()
    lock = backend.lock("r")
    assert lock.acquire()
    assert lock.locked()
    assert in_thread(lambda: backend.lock("r").acquire(blocking=False)) is False
    lock.release()
    assert in_thread(lambda: backend.lock("r").acquire(blocking=False)) is True


def test_a_losing_attempt_leaves_no_key_behind(redlock, masters):
    backend = redlock()
    # Someone else holds the key on two masters: this attempt wins one vote of three.
    key = backend.lock("r").key
    for m in masters[1:]:
        m.client().set(key, "someone-else", px=5000)
    lock = backend.lock("r")
    assert not lock.acquire(blocking=False)
    assert lock.votes == 1
    assert not masters[0].client().exists(key)


def test_a_lease_used_up_while_asking_is_not_a_holding(redlock, masters):
    lock = redlock(ttl_ms=2).lock("r")  # 2 ms minus the drift allowance: never valid
    assert not lock.acquire(blocking=False)
    assert lock.votes == 3
    assert not any(m.client().exists(lock.key) for m in masters)


def test_the_lock_survives_one_master_lost_and_excludes_a_second_holder():
    with redis_servers(3) as servers:
        backend = RedlockBackend("test", {"urls": [s.url for s in servers], **PATIENT})
        try:
            holder = backend.lock("r")
            assert holder.acquire() and holder.votes == 3
            servers[0].crash()
            restarted = start_redis(port=servers[0].port)  # empty, as without persistence
            try:
                other = backend.lock("r")
                attempt = in_thread(lambda: (other.acquire(blocking=False), other.votes))
                assert attempt == (False, 1)  # only the restarted master said yes
                holder.release()  # two of three still had it
                assert in_thread(lambda: other.acquire(blocking=False)) is True
            finally:
                restarted.stop()
        finally:
            backend.close()


def test_release_after_expiry_raises(redlock):
    import time

    lock = redlock(ttl_ms=1000).lock("r")
    assert lock.acquire()
    time.sleep(1.1)
    with pytest.raises(LockNotOwnedError):
        lock.release()


def test_fewer_than_three_masters_is_refused():
    with pytest.raises(ValueError):
        RedlockBackend("test", {"urls": ["redis://127.0.0.1:1/0", "redis://127.0.0.1:2/0"]})


def test_setnx_with_replicas_waits_for_the_acknowledgement():
    with redis_servers(1) as (master,):
        replica = start_redis("--replicaof", "127.0.0.1", str(master.port))
        try:
            backend = SetnxLockBackend("test", {"url": master.url, "replicas": 1,
                                                "replica_timeout_ms": 2000})
            lock = backend.lock("w")
            assert lock.acquire(timeout=5)  # retries until the replica has synced
            assert replica.client().get(lock.key) == lock.token.encode()
            lock.release()
            backend.close()
        finally:
            replica.stop()


def test_setnx_with_replicas_and_none_acknowledging_is_not_acquired(redis_url, key_prefix, redis_client):
    # The stack's Redis has no replica: WAIT returns 0 and the SET is taken back.
    backend = SetnxLockBackend("test", {"url": redis_url, "key_prefix": key_prefix, "replicas": 1,
                                        "replica_timeout_ms": 50})
    lock = backend.lock("w")
    assert not lock.acquire(blocking=False)
    assert lock.fence is None and not redis_client.exists(lock.key)
    backend.close()
