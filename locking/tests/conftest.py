"""Lock fixtures: real backends on the stack's Redis (the test database) and
ZooKeeper, each test under a key prefix or root of its own."""

import uuid

import pytest
import redis as redis_py
from django.conf import settings

from locking.backends.redis.redisson import RedissonLockBackend
from locking.backends.redis.redisson_fair import RedissonFairLockBackend
from locking.backends.redis.setnx import SetnxLockBackend
from locking.backends.zookeeper import ZooKeeperLockBackend


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


def _factory(backend_cls, redis_url, key_prefix):
    made = []

    def make(**options):
        backend = backend_cls("test", {"url": redis_url, "key_prefix": key_prefix, **options})
        made.append(backend)
        return backend

    return make, made


@pytest.fixture
def redisson(redis_url, key_prefix):
    """``redisson(**options)`` → a RedissonLockBackend on the test Redis."""
    make, made = _factory(RedissonLockBackend, redis_url, key_prefix)
    yield make
    for backend in made:
        backend.close()


@pytest.fixture
def redisson_fair(redis_url, key_prefix):
    """``redisson_fair(**options)`` → a RedissonFairLockBackend on the test Redis."""
    make, made = _factory(RedissonFairLockBackend, redis_url, key_prefix)
    yield make
    for backend in made:
        backend.close()


@pytest.fixture
def setnx(redis_url, key_prefix):
    """``setnx(**options)`` → a SetnxLockBackend on the test Redis."""
    make, made = _factory(SetnxLockBackend, redis_url, key_prefix)
    yield make
    for backend in made:
        backend.close()


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
