"""The Redisson-style read-write lock against a real Redis: readers share, a writer
excludes, both halves re-enter, a writer may downgrade, an upgrade is refused, the
watchdog renews, a dead reader's hold lapses on its own, and a release wakes the
waiters by message.

Time bounds are behaviour, several times wider than the effect they check: a wake-up
by message is told from one by TTL by leases of 30 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from common.testing import in_thread, start_thread, wait_until
from locking import LockNotOwnedError, LockUpgradeError

from .conftest import PAST_THREE_LEASES_S, WATCHED_LEASE_MS, held_past_three_leases
from .workers import FORKED, read_and_write_pairs

ROOT = Path(__file__).resolve().parents[2]


def test_readers_share_it(redisson_rw):
    backend = redisson_rw()
    readers = 5
    # Each reader waits, holding the read lock, until all hold it: only if they share.
    together = threading.Barrier(readers, timeout=5)

    def read(i):
        rw = backend.read_write_lock("p")
        assert rw.read.acquire(timeout=5)
        together.wait()
        rw.read.release()

    threads = [start_thread(lambda i=i: read(i)) for i in range(readers)]
    for thread, box in threads:
        thread.join()
        assert "error" not in box, box.get("error")
    assert not backend.read_write_lock("p").read.locked()


def test_a_writer_waits_for_the_readers_and_then_excludes_them(redisson_rw):
    backend = redisson_rw()
    rw = backend.read_write_lock("p")
    rw.read.acquire()
    assert not in_thread(lambda: backend.read_write_lock("p").write.acquire(blocking=False))
    writes = []

    def write():
        other = backend.read_write_lock("p")
        assert other.write.acquire(timeout=10)
        writes.append("held")
        time.sleep(0.3)
        other.write.release()

    writer, box = start_thread(write)
    time.sleep(0.3)
    assert writes == []  # still waiting: a reader holds it
    rw.read.release()
    wait_until(lambda: writes == ["held"])
    assert rw.write.locked()
    assert not rw.read.acquire(blocking=False)  # a new reader is kept out by the writer
    assert rw.read.acquire(timeout=5)  # and let in once it is done
    writer.join()
    assert "error" not in box, box.get("error")
    rw.read.release()
    assert not rw.read.locked() and not rw.write.locked()


def test_writers_exclude_each_other(redisson_rw):
    backend = redisson_rw()
    rw = backend.read_write_lock("p")
    rw.write.acquire()
    assert not in_thread(lambda: backend.read_write_lock("p").write.acquire(blocking=False))
    assert not in_thread(lambda: backend.read_write_lock("p").read.acquire(blocking=False))
    rw.write.release()
    assert in_thread(lambda: _take_and_give_back(backend.read_write_lock("p").write))


def _take_and_give_back(lock) -> bool:
    taken = lock.acquire(blocking=False)
    if taken:
        lock.release()
    return taken


def test_readers_never_see_a_write_half_done_across_processes(redis_url, key_prefix, redis_client):
    pair = f"{key_prefix}pair"
    options = {"url": redis_url, "key_prefix": key_prefix}
    others = [FORKED.Process(target=read_and_write_pairs, args=(options, redis_url, pair, 4, 15))
              for _ in range(2)]
    for p in others:
        p.start()
    read_and_write_pairs(options, redis_url, pair, 4, 15)
    for p in others:
        p.join()
    assert [p.exitcode for p in others] == [0, 0]
    assert int(redis_client.get(f"{pair}:reads")) == 3 * 2 * 15  # every read checked a pair


def test_both_halves_are_reentrant(redisson_rw):
    rw = redisson_rw().read_write_lock("p")
    for half in (rw.read, rw.write):
        counts = [half.hold_count()]
        half.acquire()
        counts.append(half.hold_count())
        half.acquire()
        counts.append(half.hold_count())
        half.release()
        counts.append(half.hold_count())
        assert half.locked()
        half.release()
        counts.append(half.hold_count())
        assert counts == [0, 1, 2, 1, 0]
        assert not half.locked()


def test_a_writer_may_downgrade_to_a_reader(redisson_rw):
    backend = redisson_rw()
    rw = backend.read_write_lock("p")
    rw.write.acquire()
    assert rw.read.acquire(blocking=False)  # the write holder reads too
    assert not in_thread(lambda: _take_and_give_back(backend.read_write_lock("p").read))
    rw.write.release()
    # Downgraded: it still reads, other readers may join, writers may not.
    assert rw.read.owned() and not rw.write.locked()
    assert in_thread(lambda: _take_and_give_back(backend.read_write_lock("p").read))
    assert not in_thread(lambda: backend.read_write_lock("p").write.acquire(blocking=False))
    rw.read.release()
    assert not rw.read.locked()


def test_a_downgrade_wakes_the_waiting_readers(redisson_rw):
    backend = redisson_rw()
    rw = backend.read_write_lock("p")
    rw.write.acquire()
    rw.read.acquire()
    woken = []

    def read():
        other = backend.read_write_lock("p")
        assert other.read.acquire(timeout=20)
        woken.append(time.monotonic())
        other.read.release()

    reader, _ = start_thread(read)
    time.sleep(0.3)
    released = time.monotonic()
    rw.write.release()
    reader.join()
    assert woken and woken[0] - released < 10  # by message: the lock's lease is 30 s
    rw.read.release()


def test_an_upgrade_is_refused_at_once_instead_of_waiting_for_itself(redisson_rw):
    rw = redisson_rw(wait_timeout=10).read_write_lock("p")
    rw.read.acquire()
    started = time.monotonic()
    with pytest.raises(LockUpgradeError):
        rw.write.acquire()
    with pytest.raises(LockUpgradeError):
        rw.write.acquire(blocking=False)
    assert time.monotonic() - started < 5  # not the 10 s wait
    assert rw.read.hold_count() == 1 and not rw.write.locked()  # nothing changed
    assert rw.write.waiting() == []  # never marked waiting
    rw.read.release()
    assert rw.write.acquire(blocking=False)  # released first, then it may write
    rw.write.release()


def test_a_release_by_a_thread_that_does_not_hold_is_refused(redisson_rw):
    backend = redisson_rw()
    rw = backend.read_write_lock("p")
    rw.read.acquire()
    with pytest.raises(LockNotOwnedError):
        in_thread(lambda: backend.read_write_lock("p").read.release())
    with pytest.raises(LockNotOwnedError):
        rw.write.release()  # it reads, it does not write
    assert rw.read.hold_count() == 1
    rw.read.release()
    with pytest.raises(LockNotOwnedError):
        rw.read.release()
    assert not rw.read.locked()


@pytest.mark.parametrize("half", ["read", "write"])
def test_the_watchdog_keeps_either_half_past_three_leases(redisson_rw, half, unstalled):
    backend = redisson_rw(watchdog_timeout_ms=WATCHED_LEASE_MS)
    unstalled(lambda name: held_past_three_leases(backend, getattr(backend.read_write_lock(name), half)))


def test_the_watchdog_keeps_watching_while_a_downgraded_holder_reads(redisson_rw, unstalled):
    backend = redisson_rw(watchdog_timeout_ms=WATCHED_LEASE_MS)

    def attempt(name):
        rw = backend.read_write_lock(name)
        rw.write.acquire()
        rw.read.acquire()
        rw.write.release()
        assert backend.watchdog.watching(rw.read.key, rw.read.holder())
        time.sleep(PAST_THREE_LEASES_S)
        assert rw.read.owned()
        rw.read.release()
        assert not backend.watchdog.watching(rw.read.key, rw.read.holder())

    unstalled(attempt)


def test_a_dead_readers_hold_lapses_while_a_live_reader_reads_on(redisson_rw, redis_url, key_prefix):
    lease_ms = 1000
    dead = subprocess.Popen(
        [sys.executable, "-m", "locking.tests.workers", "hold-read", redis_url, key_prefix, str(lease_ms)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert dead.stdout.readline().strip() == "held"
        backend = redisson_rw(watchdog_timeout_ms=lease_ms)
        live = backend.read_write_lock("held")
        assert live.read.acquire(blocking=False)
        os.kill(dead.pid, signal.SIGKILL)
        killed = time.monotonic()
        dead.wait()
        time.sleep(2.0)  # two leases: the live reader's watchdog kept the lock alive
        assert live.read.owned()
        live.read.release()
        writer = in_thread(lambda: backend.read_write_lock("held").write.acquire(blocking=False))
        # The dead reader's hold went with its own lease, not with the lock's.
        assert writer, "the dead reader still holds it"
        assert time.monotonic() - killed < 5
    finally:
        if dead.poll() is None:
            dead.kill()
            dead.wait()


def test_a_waiting_writer_keeps_new_readers_out_until_it_has_written(redisson_rw):
    backend = redisson_rw()
    first = backend.read_write_lock("p")
    first.read.acquire()
    order = []

    def write():
        rw = backend.read_write_lock("p")
        assert rw.write.acquire(timeout=10)
        order.append("write")
        rw.write.release()

    writer, _ = start_thread(write)
    wait_until(lambda: len(first.write.waiting()) == 1)
    # Only readers hold it, yet a new reader waits: the writer is first.
    assert not in_thread(lambda: backend.read_write_lock("p").read.acquire(blocking=False))

    def read():
        rw = backend.read_write_lock("p")
        assert rw.read.acquire(timeout=10)
        order.append("read")
        rw.read.release()

    reader, _ = start_thread(read)
    time.sleep(0.3)
    first.read.acquire()  # a re-entry never waits: the writer waits for this reader
    first.read.release()
    assert order == []
    first.read.release()
    writer.join()
    reader.join()
    assert order == ["write", "read"]


def test_a_writer_that_gives_up_lets_the_readers_in(redisson_rw):
    backend = redisson_rw()
    first = backend.read_write_lock("p")
    first.read.acquire()
    assert not in_thread(lambda: backend.read_write_lock("p").write.acquire(timeout=0.3))
    assert first.write.waiting() == []
    assert in_thread(lambda: _take_and_give_back(backend.read_write_lock("p").read))
    first.read.release()


def test_one_release_wakes_every_waiting_reader_by_message(redisson_rw):
    backend = redisson_rw()  # leases of 30 s: a wake-up by TTL would take that long
    rw = backend.read_write_lock("p")
    rw.write.acquire()
    inside = threading.Barrier(4, timeout=10)  # the three readers and this thread

    def read():
        other = backend.read_write_lock("p")
        assert other.read.acquire(timeout=20)
        inside.wait()
        other.read.release()

    readers = [start_thread(read) for _ in range(3)]
    time.sleep(0.3)
    released = time.monotonic()
    rw.write.release()
    inside.wait()  # all three read at once
    assert time.monotonic() - released < 10  # by message: the lease is 30 s
    for thread, box in readers:
        thread.join()
        assert "error" not in box, box.get("error")


def test_force_release_frees_it_in_either_mode_and_wakes_a_waiter(redisson_rw):
    backend = redisson_rw()
    rw = backend.read_write_lock("p")
    rw.read.acquire()
    waiter, box = start_thread(lambda: _take_and_release(backend.read_write_lock("p").write))
    time.sleep(0.3)
    assert rw.read.force_release()
    waiter.join(timeout=5)
    assert box.get("value") is True
    assert not rw.read.force_release()  # free now


def _take_and_release(lock) -> bool:
    taken = lock.acquire(timeout=20)
    if taken:
        lock.release()
    return taken
