"""Timings written off the request's path (common.metrics.observe_later): by the
process's timings thread within a second, by a scrape's first step, and by a gunicorn
or granian worker as it leaves; a file that cannot be written costs the figure only;
a worker's file being created does not fail a scrape."""

import atexit
import multiprocessing
import multiprocessing.util
import os
import struct
import sys
import time
import uuid
from types import SimpleNamespace

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, Histogram, generate_latest, multiprocess
from prometheus_client.mmap_dict import MmapedDict, mmap_key

from common.metrics import FLUSH_EVERY, _WorkersCollector, observe_later, timings_flush
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


def _gunicorn_worker_leaves(case: str, report, *, booted: bool) -> None:
    observe_later(TIMED, (case,), 0.01)
    atexit.register(lambda: report.send(("atexit", observed(case))))
    # In the worker, right before it exits: told to stop (not alive), or failing to boot.
    gunicorn.worker_exit(server=None, worker=SimpleNamespace(pid=os.getpid(), booted=booted, alive=False))
    report.send(("returned", observed(case)))
    sys.exit(3)  # gunicorn's code for a worker that failed to boot


@pytest.mark.parametrize("booted", [True, False], ids=["told-to-stop", "failed-to-boot"])
def test_a_gunicorn_worker_writes_its_timings_as_it_leaves(booted):
    """Told to stop, it leaves at once (os._exit, 0) once atexit's handlers ran; one
    that failed to boot goes on to leave with the code that says so."""
    case = uuid.uuid4().hex
    receive, report = multiprocessing.Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=_gunicorn_worker_leaves, args=(case, report),
                                                         kwargs={"booted": booted})
    child.start()
    child.join(30)
    said = []
    while receive.poll(1):
        said.append(receive.recv())
    if booted:
        assert (child.exitcode, said) == (0, [("atexit", 1)])
    else:
        assert (child.exitcode, said[0]) == (3, ("returned", 1))


def _observe_and_leave(case: str, report) -> None:
    observe_later(TIMED, (case,), 0.01)
    # Runs after every finalizer of a higher priority, the flush among them.
    multiprocessing.util.Finalize(None, lambda: report.send(observed(case)), exitpriority=-1)


def test_a_granian_worker_writes_its_timings_as_it_leaves():
    """granian's workers are multiprocessing's forked children: they leave by
    os._exit once multiprocessing's finalizers ran, without atexit."""
    case = uuid.uuid4().hex
    receive, report = multiprocessing.Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=_observe_and_leave, args=(case, report))
    child.start()
    child.join(10)
    assert child.exitcode == 0
    assert receive.poll(5) and receive.recv() == 1


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


def test_a_scrape_skips_the_file_a_worker_is_creating(tmp_path):
    """A worker's file exists empty for an instant before it is sized; read then, it
    failed the whole scrape (500). It is left out; every other file is read."""
    written = MmapedDict(str(tmp_path / "counter_1.db"))
    key = mmap_key("flashsale_test_total", "flashsale_test_total", (), (), "a test's count")
    written.write_value(key, 3.0, 0.0)
    written.close()
    (tmp_path / "counter_2.db").touch()  # the other worker's, being created
    with pytest.raises(struct.error):  # as prometheus_client reads it
        plain = CollectorRegistry()
        multiprocess.MultiProcessCollector(plain, path=str(tmp_path))
        generate_latest(plain)
    ours = CollectorRegistry()
    ours.register(_WorkersCollector(str(tmp_path)))
    assert "flashsale_test_total 3.0" in generate_latest(ours).decode()


def test_a_process_tree_is_read_from_proc_its_reaped_childrens_cpu_included():
    """instance_usage(master): the master's CPU with its reaped children's, and that of
    its live children; their resident memory; how many they are."""
    import os
    import subprocess
    import sys

    from common.metrics import instance_usage

    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    # This process and the children earlier tests left running (multiprocessing's
    # resource tracker, say): the tree the counts below add to.
    cpu_before, _, before = instance_usage(os.getpid())
    subprocess.run([sys.executable, "-c", burn], check=True)  # a child that ended: reaped
    cpu, rss, processes = instance_usage(os.getpid())
    assert cpu >= cpu_before + 0.3 and rss > 10_000_000 and processes == before >= 1
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 10
        while instance_usage(os.getpid())[2] < before + 1:  # the child as /proc lists it
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with_child = instance_usage(os.getpid())
        assert with_child[1] > rss and with_child[0] >= cpu
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_requests_in_flight_are_written_at_the_flush():
    from common.metrics import request_ended, request_started

    def in_flight() -> float | None:
        return REGISTRY.get_sample_value("flashsale_requests_in_flight")

    request_started()
    request_started()
    timings_flush()
    assert in_flight() == 2
    request_ended()
    request_ended()
    timings_flush()
    assert in_flight() == 0
