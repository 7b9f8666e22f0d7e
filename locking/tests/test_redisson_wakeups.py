"""How ``redisson`` wakes its waiters, against a real Redis: a release wakes one
waiter in all, not one per process (issue 14). The processes that wait are listed
in Redis, each listening on a channel of its own; the stand-ins for other processes
here are plain pub/sub connections of the test's, subscribed as such a process is.

Time bounds are behaviour, not performance: a waiter that no wake-up reached would
wait out the 30 s watchdog lease, far past each bound.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from common.testing import start_thread, wait_until
from locking.backends.redis.redisson import process_id
from locking.backends.redis.wakeups import Listing, Wakeups

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def processes(redis_client):
    """``listen(*ids)``: stand-ins for waiting processes, each subscribed to its
    channel of ``lock``; ``heard()`` says who got which messages so far."""
    made = []

    def listen(lock, *ids):
        pubsubs = {}
        for pid in ids:
            pubsub = redis_client.pubsub()
            pubsub.subscribe(f"{lock.channel_prefix}{pid}")
            assert pubsub.get_message(timeout=2)["type"] == "subscribe"
            pubsubs[pid] = pubsub
            made.append(pubsub)

        def heard():
            got = {}
            for pid, pubsub in pubsubs.items():
                while (m := pubsub.get_message(timeout=0.2)) is not None:
                    if m["type"] == "message":
                        got.setdefault(pid, []).append(m["data"])
            return got

        return heard

    yield listen
    for pubsub in made:
        pubsub.close()


def test_a_release_wakes_one_listed_process_and_the_next_release_the_next(redisson, redis_client, processes):
    lock = redisson().lock("w")
    heard = processes(lock, "p1", "p2", "p3")
    redis_client.rpush(lock.waiting_key, "p1", "p2", "p3")
    for expected in ("p1", "p2", "p3", "p1"):
        lock.acquire()
        lock.release()
        assert list(heard()) == [expected]  # one process woken, the one listed longest ago
    assert redis_client.lrange(lock.waiting_key, 0, -1) == [b"p2", b"p3", b"p1"]


def test_a_listed_process_that_nobody_hears_is_dropped_and_the_next_woken(redisson, redis_client, processes):
    lock = redisson().lock("w")
    heard = processes(lock, "alive")
    redis_client.rpush(lock.waiting_key, "dead", "alive")  # "dead" died while listed
    lock.acquire()
    lock.release()
    assert list(heard()) == ["alive"]
    assert redis_client.lrange(lock.waiting_key, 0, -1) == [b"alive"]


def test_a_forced_release_wakes_one_process(redisson, redis_client, processes):
    lock = redisson().lock("w")
    heard = processes(lock, "p1", "p2")
    redis_client.rpush(lock.waiting_key, "p1", "p2")
    lock.acquire()
    assert lock.force_release()
    assert list(heard()) == ["p1"]


def test_a_passed_on_wake_up_reaches_another_process_only_while_the_lock_is_free(
        redisson, redis_client, processes):
    lock = redisson().lock("w")
    heard = processes(lock, "p1")
    redis_client.rpush(lock.waiting_key, "p1")
    lock.acquire()
    lock._wake_one()
    assert heard() == {}  # held: its holder's release will wake someone
    lock.release()
    assert list(heard()) == ["p1"]
    lock._wake_one()
    assert list(heard()) == ["p1"]


def test_waiters_in_other_processes_are_each_woken_by_a_release(
        redisson, redis_client, redis_url, key_prefix):
    backend = redisson()  # 30 s watchdog lease: only wake-ups can serve them quickly
    lock = backend.lock("once")
    lock.acquire()
    served = f"{key_prefix}served"
    waiters = [subprocess.Popen([sys.executable, "-m", "locking.tests.workers", "wait-once", redis_url,
                                 key_prefix, served], cwd=ROOT) for _ in range(3)]
    try:
        wait_until(lambda: redis_client.llen(lock.waiting_key) == 3, timeout=20)  # one entry a process
        started = time.monotonic()
        lock.release()
        wait_until(lambda: redis_client.llen(served) == 3, timeout=15)
        assert time.monotonic() - started < 15
        assert len(set(redis_client.lrange(served, 0, -1))) == 3
        for w in waiters:
            assert w.wait(timeout=10) == 0
    finally:
        for w in waiters:
            w.kill()
    assert redis_client.llen(lock.waiting_key) == 0  # each left the list as it stopped waiting


def test_a_process_whose_listing_redis_lost_lists_itself_again_when_its_wait_runs_out(redisson, redis_client):
    lock = redisson().lock("w")
    # Held by someone else, under a short lease renewed by the test: the waiter wakes
    # by that TTL, never by a release.
    redis_client.set(lock.key, "1:someone", px=700)

    def take_and_let_go():
        taken = lock.acquire(timeout=20)
        lock.release()
        return taken

    def listed_while_held() -> bool:
        # Renewed while the waiter comes to ask, however long its thread takes: a lease
        # run out first would let it take the lock without ever listing itself.
        redis_client.set(lock.key, "1:someone", px=700)
        return redis_client.lrange(lock.waiting_key, 0, -1) == [process_id().encode()]

    thread, box = start_thread(take_and_let_go, daemon=True)
    wait_until(listed_while_held, what="the waiter listed")
    redis_client.delete(lock.waiting_key)  # as a Redis restarted without it
    relisted = False
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not relisted:
        redis_client.set(lock.key, "1:someone", px=700)
        time.sleep(0.1)
        relisted = redis_client.lrange(lock.waiting_key, 0, -1) == [process_id().encode()]
    assert relisted
    redis_client.delete(lock.key)  # the other holder lets go without a release (no wake-up)
    thread.join(timeout=5)
    assert box.get("value") is True


def test_a_wake_up_that_reaches_a_process_whose_last_waiter_left_is_passed_on(redis_client):
    wakeups = Wakeups(redis_client, standing_channel="test:wakeups:standing")
    passed_on = threading.Event()
    listing = Listing(join=lambda: None, leave=lambda: None, forward=passed_on.set)
    channel = "test:wakeups:mine"
    with wakeups.subscribed(channel, listing=listing):
        # A release picks this process as its last waiter stops waiting: whether the
        # message lands before the waiter leaves (a permit nobody takes) or after
        # (a message for a channel nobody waits on), it is passed on.
        assert redis_client.publish(channel, "0") == 1
    assert passed_on.wait(timeout=5)
    wakeups.close()
