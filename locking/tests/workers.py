"""Code that runs in child processes of the lock tests, and how they start them."""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time

import redis

from locking.backends.redis.redisson import RedissonLockBackend
from locking.backends.redis.redisson_fair import RedissonFairLockBackend
from locking.backends.redis.redisson_rw import RedissonReadWriteLockBackend
from locking.backends.redis.setnx import SetnxLockBackend
from locking.backends.zookeeper import ZooKeeperLockBackend

# Forked from multiprocessing's server (which tests/forked.py, if it ran in this pytest,
# has had import the libraries), not a new interpreter that imports them all (spawn);
# neither copies pytest's threads, as a fork of pytest would.
FORKED = multiprocessing.get_context("forkserver")

BACKENDS = {"redisson": RedissonLockBackend, "redisson-fair": RedissonFairLockBackend,
            "redisson-rw": RedissonReadWriteLockBackend, "setnx": SetnxLockBackend,
            "zookeeper": ZooKeeperLockBackend}


def _run_threads(workers: list[threading.Thread], errors: list) -> None:
    """Start and join ``workers``; raise if any appended to ``errors``."""
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise RuntimeError(f"{len(errors)} of {len(workers)} threads failed: {errors[0]!r}")


def increment_under_lock(kind: str, options: dict, url: str, counter: str, threads: int, rounds: int) -> None:
    """``threads`` threads each add 1 to the Redis key ``counter`` ``rounds`` times
    as GET, pause, SET: without the lock, increments are lost."""
    backend = BACKENDS[kind]("test", {**options, "wait_timeout": 30})
    client = redis.Redis.from_url(url)

    errors = []

    def work():
        lock = backend.lock("counter")
        try:
            for _ in range(rounds):
                with lock:
                    value = int(client.get(counter) or 0)
                    time.sleep(0.0005)
                    client.set(counter, value + 1)
        except BaseException as e:
            errors.append(e)

    _run_threads([threading.Thread(target=work) for _ in range(threads)], errors)
    backend.close()


def hold_forever(url: str, prefix: str, watchdog_timeout_ms: int) -> None:
    """Take a redisson lock with the watchdog, say so, and never let go."""
    backend = RedissonLockBackend("test", {"url": url, "key_prefix": prefix,
                                           "watchdog_timeout_ms": watchdog_timeout_ms})
    lock = backend.lock("held")
    assert lock.acquire(blocking=False)
    print("held", flush=True)
    while True:
        time.sleep(60)


def read_and_write_pairs(options: dict, url: str, pair: str, threads: int, rounds: int) -> None:
    """Half the threads write the Redis keys ``pair:a`` and ``pair:b`` the same value,
    one after the other with a pause between, under the write lock; the other half
    read both under the read lock and fail if they differ (a write was under way)."""
    backend = RedissonReadWriteLockBackend("test", {**options, "wait_timeout": 30})
    client = redis.Redis.from_url(url)
    errors = []

    def work(writer: bool):
        rw = backend.read_write_lock("pair")
        try:
            for n in range(rounds):
                if writer:
                    with rw.write:
                        value = f"{threading.get_ident()}:{n}"
                        client.set(f"{pair}:a", value)
                        time.sleep(0.001)
                        client.set(f"{pair}:b", value)
                else:
                    with rw.read:
                        a = client.get(f"{pair}:a")
                        time.sleep(0.001)
                        b = client.get(f"{pair}:b")
                    if a != b:
                        raise AssertionError(f"read {a!r} and {b!r}: a write was under way")
                    client.incr(f"{pair}:reads")
        except BaseException as e:
            errors.append(e)

    _run_threads([threading.Thread(target=work, args=(i % 2 == 0,)) for i in range(threads)], errors)
    backend.close()


def hold_read_forever(url: str, prefix: str, watchdog_timeout_ms: int) -> None:
    """Take a read-write lock's read half with the watchdog, say so, and never let go."""
    backend = RedissonReadWriteLockBackend("test", {"url": url, "key_prefix": prefix,
                                                    "watchdog_timeout_ms": watchdog_timeout_ms})
    assert backend.read_write_lock("held").read.acquire(blocking=False)
    print("held", flush=True)
    while True:
        time.sleep(60)


def wait_in_line(url: str, prefix: str, waiter_timeout_ms: int, served: str) -> None:
    """Wait for a redisson-fair lock (no wait timeout), and once served, push this
    process's holder name onto the Redis list ``served`` and let go."""
    backend = RedissonFairLockBackend("test", {"url": url, "key_prefix": prefix,
                                               "waiter_timeout_ms": waiter_timeout_ms})
    lock = backend.lock("line")
    lock.acquire()
    backend.client.rpush(served, lock.holder())
    lock.release()
    backend.close()


def wait_once(url: str, prefix: str, served: str) -> None:
    """Wait for a redisson lock (20 s at most), and once it is taken, push this
    process's holder name onto the Redis list ``served`` and let go."""
    backend = RedissonLockBackend("test", {"url": url, "key_prefix": prefix})
    lock = backend.lock("once")
    if lock.acquire(timeout=20):
        backend.client.rpush(served, lock.holder())
        lock.release()
    backend.close()


if __name__ == "__main__":
    if sys.argv[1] == "wait-once":
        wait_once(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "wait-in-line":
        wait_in_line(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif sys.argv[1] == "hold-read":
        hold_read_forever(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        hold_forever(sys.argv[1], sys.argv[2], int(sys.argv[3]))
