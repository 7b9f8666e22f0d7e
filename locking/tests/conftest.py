"""Lock fixtures: real backends on the stack's Redis (the test database) and
ZooKeeper, each test under a key prefix or root of its own."""

import uuid

import pytest
import redis as redis_py
from django.conf import settings

from locking.backends.local import LocalLockBackend
from locking.backends.redis.redisson import RedissonLockBackend
from locking.backends.redis.redisson_fair import RedissonFairLockBackend
from locking.backends.redis.redisson_rw import RedissonReadWriteLockBackend
from locking.backends.redis.setnx import SetnxLockBackend
from locking.backends.zookeeper import ZooKeeperLockBackend

# The lease of the watchdog tests that wait three leases out. Renewed every third of it,
# a lease survives a stall of two thirds of it (a starved thread, Redis waiting on a busy
# disk's fsync): a second here, where 600 ms lost the lock on a slow machine.
WATCHED_LEASE_MS = 1500
PAST_THREE_LEASES_S = 3.2 * WATCHED_LEASE_MS / 1000


@pytest.fixture
def redis_url() -> str:
    return settings.TEST_REDIS_URL


@pytest.fixture
def redis_client(redis_url):
    client = redis_py.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def zk_root():
    return f"/flashsale-test/{uuid.uuid4().hex[:8]}"


@pytest.fixture
def key_prefix(redis_client):
    prefix = f"test:{uuid.uuid4().hex[:8]}:"
    yield prefix
    keys = list(redis_client.scan_iter(f"{prefix}*"))
    if keys:
        redis_client.delete(*keys)


def _backends(backend_cls, redis_url, key_prefix):
    """Yield ``make(**options)`` → a ``backend_cls`` on the test Redis; close them after."""
    made = []

    def make(**options):
        backend = backend_cls("test", {"url": redis_url, "key_prefix": key_prefix, **options})
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


@pytest.fixture
def redisson(redis_url, key_prefix):
    yield from _backends(RedissonLockBackend, redis_url, key_prefix)


@pytest.fixture
def redisson_fair(redis_url, key_prefix):
    yield from _backends(RedissonFairLockBackend, redis_url, key_prefix)


@pytest.fixture
def redisson_rw(redis_url, key_prefix):
    yield from _backends(RedissonReadWriteLockBackend, redis_url, key_prefix)


@pytest.fixture
def setnx(redis_url, key_prefix):
    yield from _backends(SetnxLockBackend, redis_url, key_prefix)


@pytest.fixture
def zk(zk_root):
    """``zk(**options)`` → a ZooKeeperLockBackend with its own client (session)."""
    made = []

    def make(cls=ZooKeeperLockBackend, **options):
        backend = cls("test", {"hosts": settings.ZOOKEEPER_HOSTS, "root": zk_root, **options})
        made.append(backend)
        return backend

    yield make
    if made:
        made[0].client.delete(zk_root, recursive=True)
    for backend in made:
        backend.close()


@pytest.fixture
def local():
    """``make(**options)`` → a process-local lock backend."""
    return lambda **options: LocalLockBackend("test", options)
