"""Lock fixtures: real backends on the stack's Redis (the test database) and
ZooKeeper, each test under a key prefix or root of its own."""

import threading
import time
import uuid
from collections.abc import Callable

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
# No renewal survives a machine that stands still for a lease (both cores lent to
# another load, the VM paused): such a try proves nothing and is tried again.
STALL_S = WATCHED_LEASE_MS / 2 / 1000
WATCH_TRIES = 5


class StallProbe:
    """Reads Redis's clock every 20 ms on a connection and a thread of its own: the
    longest gap between two readings is how long the machine or Redis stood still."""

    def __init__(self, redis_url: str):
        self._client = redis_py.Redis.from_url(redis_url)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="stall-probe", daemon=True)
        self.longest_s = 0.0

    def _now(self) -> float:
        seconds, micros = self._client.time()
        return seconds + micros / 1e6

    def _read(self) -> None:
        last = self._first
        while not self._stop.wait(0.02):
            now = self._now()
            self.longest_s = max(self.longest_s, now - last)
            last = now

    def __enter__(self) -> "StallProbe":
        self._first = self._now()  # before the try starts: a stall from its first instant counts
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()
        self._client.close()


def held_past_three_leases(backend, lock) -> None:
    """``lock`` (of ``backend``, its watchdog watching) acquired, still held past
    three leases, and released: gone, and no longer watched."""
    lock.acquire()
    time.sleep(PAST_THREE_LEASES_S)
    assert lock.owned()
    assert 0 < lock.ttl_ms() <= WATCHED_LEASE_MS
    lock.release()
    assert lock.ttl_ms() == -2
    assert not backend.watchdog.watching(lock.key, lock.holder())


def run_unstalled(redis_url: str, attempt: Callable[[str], None], tries: int = WATCH_TRIES) -> None:
    """Run ``attempt(name)`` (a lock's name, new each try) until it passes; a try that
    fails while the probe saw the machine stall is tried again. A failure without a
    stall fails the test; so do ``tries`` stalled tries."""
    stalls = []
    for n in range(tries):
        with StallProbe(redis_url) as probe:
            try:
                attempt(f"watched-{n}")
                return
            except AssertionError as e:
                failure = e
        # Read once the probe stopped: its last reading, the one a stall held up, is in.
        if probe.longest_s < STALL_S:
            raise failure
        stalls.append(round(probe.longest_s, 2))
    pytest.fail(f"the machine stood still in every try (longest gaps, s: {stalls})")


@pytest.fixture
def unstalled(redis_url) -> Callable[[Callable[[str], None]], None]:
    """``unstalled(attempt)``: :func:`run_unstalled` on the test Redis."""
    return lambda attempt: run_unstalled(redis_url, attempt)


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
