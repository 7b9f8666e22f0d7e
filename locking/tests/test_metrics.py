"""What the locks report for /metrics (locking.metrics): every acquisition once, by
outcome; a wait for each one granted and a hold for each release; losses where they
are found; the watchdog's renewals. On real backends: in-process locks, and Redis."""

import time
import uuid

import pytest
from prometheus_client import REGISTRY

from common.metrics import timings_flush
from common.testing import in_thread
from locking import LockNotOwnedError, base, get_lock, get_locks
from locking.backends.local import LocalLockBackend
from locking.backends.null import NullLockBackend
from locking.backends.redis.redisson import RedissonLockBackend
from locking.backends.redis.setnx import SetnxLockBackend


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def figures(backend: str) -> dict[str, float]:
    """The backend's lock figures, timings written first (what a scrape does)."""
    timings_flush()
    acquisitions = {outcome: sample("flashsale_lock_acquisitions_total", backend=backend, outcome=outcome)
                    for outcome in ("acquired", "timed_out", "refused", "unavailable")}
    return {
        **acquisitions,
        "waits": sample("flashsale_lock_wait_seconds_count", backend=backend),
        "holds": sample("flashsale_lock_hold_seconds_count", backend=backend),
        "lost_at_release": sample("flashsale_lock_losses_total", backend=backend, found="at_release"),
    }


def labelled(lock, backend: str):
    lock.backend_alias = backend  # what get_lock does with the settings' alias
    return lock


class StoppedClock:
    """``locking.base``'s clock, moved only by the test: a hold lasts what the test
    says, however long the machine takes over the round trips within it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def __getattr__(self, name: str):
        return getattr(time, name)  # the rest of the time module as it is


def test_each_acquisition_is_counted_once_and_timed_waiting_and_held(monkeypatch):
    clock = StoppedClock()
    monkeypatch.setattr(base, "time", clock)
    backend = f"t-{uuid.uuid4().hex[:8]}"
    locks = LocalLockBackend("local", {})
    holder = labelled(locks.lock("a"), backend)
    assert holder.acquire()
    assert in_thread(lambda: labelled(locks.lock("a"), backend).acquire(timeout=0.05)) is False
    assert in_thread(lambda: labelled(locks.lock("a"), backend).acquire(blocking=False)) is False
    clock.now += 0.03
    holder.release()
    with labelled(locks.lock("b"), backend):
        pass
    assert figures(backend) == {"acquired": 2, "timed_out": 1, "refused": 1, "unavailable": 0,
                                "waits": 2, "holds": 2, "lost_at_release": 0}
    # The first hold lasted 30 ms on the test's clock, the second none: their buckets say so.
    assert sample("flashsale_lock_hold_seconds_bucket", backend=backend, le="0.025") == 1
    assert sample("flashsale_lock_hold_seconds_sum", backend=backend) == pytest.approx(0.03)


def test_the_settings_alias_labels_the_locks_it_builds():
    before = figures("local")
    with get_lock(f"m-{uuid.uuid4().hex}", alias="local"):
        pass
    with get_locks([f"m-{uuid.uuid4().hex}", f"n-{uuid.uuid4().hex}"], alias="local"):
        pass  # several names: one acquisition, one wait, one hold
    after = figures("local")
    assert {k: after[k] - before[k] for k in after} == {
        "acquired": 2, "timed_out": 0, "refused": 0, "unavailable": 0,
        "waits": 2, "holds": 2, "lost_at_release": 0}


def test_a_lock_that_excludes_nobody_is_not_measured():
    backend = f"t-{uuid.uuid4().hex[:8]}"
    with labelled(NullLockBackend("null", {}).lock("a"), backend):
        pass
    assert set(figures(backend).values()) == {0}


def test_a_reentrant_hold_is_timed_per_release_from_its_own_acquisition(redis_url, key_prefix, monkeypatch):
    clock = StoppedClock()
    monkeypatch.setattr(base, "time", clock)
    backend = f"t-{uuid.uuid4().hex[:8]}"
    locks = RedissonLockBackend(backend, {"url": redis_url, "key_prefix": key_prefix})
    try:
        lock = labelled(locks.lock("r"), backend)
        lock.acquire()
        clock.now += 0.06
        lock.acquire()  # held twice by this thread
        lock.release()  # the inner hold: no time at all on this clock
        lock.release()  # the outer one: 60 ms
    finally:
        locks.close()
    assert figures(backend)["holds"] == 2
    assert sample("flashsale_lock_hold_seconds_bucket", backend=backend, le="0.05") == 1
    assert sample("flashsale_lock_hold_seconds_sum", backend=backend) == pytest.approx(0.06)


def test_a_hold_whose_lease_ran_out_is_counted_lost_at_its_release(redis_url, key_prefix):
    backend = f"t-{uuid.uuid4().hex[:8]}"
    locks = SetnxLockBackend(backend, {"url": redis_url, "key_prefix": key_prefix, "ttl_ms": 100})
    try:
        lock = labelled(locks.lock("s"), backend)
        lock.acquire()
        time.sleep(0.25)  # the key expired: this holder no longer holds it
        with pytest.raises(LockNotOwnedError):
            lock.release()
    finally:
        locks.close()
    assert figures(backend) == {"acquired": 1, "timed_out": 0, "refused": 0, "unavailable": 0,
                                "waits": 1, "holds": 1, "lost_at_release": 1}


def test_the_watchdog_counts_its_renewals_by_the_backend_alias(redis_url, key_prefix):
    backend = f"t-{uuid.uuid4().hex[:8]}"
    locks = RedissonLockBackend(backend, {"url": redis_url, "key_prefix": key_prefix,
                                          "watchdog_timeout_ms": 300})
    try:
        lock = locks.lock("r")
        lock.acquire()
        began = time.monotonic()
        # Four renewals (one every 100 ms), however late the machine runs the watchdog's
        # thread; the deadline bounds a watchdog that never renews.
        while renewed(backend) < 4 and time.monotonic() < began + 60:
            time.sleep(0.01)
        held = time.monotonic() - began
        lock.release()
    finally:
        locks.close()
    renewals = renewed(backend)
    assert renewals >= 4
    # Never sooner than a third of the lease after the last: at most one a 100 ms held.
    assert renewals <= held / 0.1 + 1, (renewals, held)
    assert sample("flashsale_lock_renewals_total", backend=backend, outcome="failed") == 0


def renewed(backend: str) -> float:
    return sample("flashsale_lock_renewals_total", backend=backend, outcome="renewed")
