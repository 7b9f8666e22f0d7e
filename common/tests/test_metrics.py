"""Timings written off the request's path (common.metrics.observe_later): by the
process's timings thread within a second, by a scrape's first step, and by a gunicorn
worker as it leaves; a file that cannot be written costs the figure only."""

import time
import uuid

from prometheus_client import REGISTRY, Histogram

from common.metrics import FLUSH_EVERY, observe_later, timings_flush
from flashsale import gunicorn

TIMED = Histogram("flashsale_test_timed_seconds", "a test's timings", ["case"])


def observed(case: str) -> float:
    return REGISTRY.get_sample_value("flashsale_test_timed_seconds_count", {"case": case}) or 0.0


def test_the_timings_thread_writes_what_was_observed_within_a_second():
    case = uuid.uuid4().hex
    for _ in range(3):
        observe_later(TIMED, (case,), 0.01)
    deadline = time.monotonic() + FLUSH_EVERY * 5
    while observed(case) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert observed(case) == 3


def test_a_gunicorn_worker_writes_its_timings_as_it_leaves():
    case = uuid.uuid4().hex
    observe_later(TIMED, (case,), 0.01)
    gunicorn.worker_exit(server=None, worker=None)  # in the worker, right before it exits
    assert observed(case) == 1


def test_a_timing_that_cannot_be_written_is_logged_and_the_rest_are_written(monkeypatch, caplog):
    case, broken = uuid.uuid4().hex, uuid.uuid4().hex
    real = TIMED.labels

    def labels(*values):
        if values == (broken,):
            raise OSError(28, "No space left on device")
        return real(*values)

    monkeypatch.setattr(TIMED, "labels", labels)
    observe_later(TIMED, (broken,), 0.01)
    observe_later(TIMED, (case,), 0.01)
    timings_flush()
    assert observed(case) == 1
    assert "a timing was not written for /metrics" in caplog.text
