"""Prometheus metrics: what every process of the stack serves at ``/metrics``.

Under gunicorn a request reaches one of several worker processes, so a worker's own
counters are a share of the instance's. prometheus-client's multiprocess mode keeps
every worker's values in files under ``PROMETHEUS_MULTIPROC_DIR``, which the stack's
launcher sets per instance; a scrape, whichever worker answers it, sums the files.
The directory is emptied before the server starts (``flashsale.serve``: a file of an
earlier run's process would be summed too), and a worker that exits is marked dead,
so its counters stay in the sum while its live gauges leave it (``flashsale.gunicorn``).
Without the variable (the test client, ``manage.py`` commands) a process serves its
own registry.

Labels are bounded sets (a strategy, an answer's code), never a sku, a user or a
key: each value of a label is a series Prometheus keeps.
"""

from __future__ import annotations

import glob
import logging
import multiprocessing.util
import os
import threading
import time
from argparse import ArgumentParser
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Protocol

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


class _WorkersCollector:
    """Every worker's file in ``path``, as prometheus-client's ``MultiProcessCollector``
    reads them, but one a worker is creating this instant: it exists empty until
    sized, and read so it fails the whole scrape (500). Nothing in it yet, nothing lost."""

    def __init__(self, path: str) -> None:
        self.path = path

    def collect(self) -> Iterable[Metric]:
        files = glob.glob(os.path.join(self.path, "*.db"))
        merged: Iterable[Metric] = multiprocess.MultiProcessCollector.merge(
            [path for path in files if _sized(path)], accumulate=True)
        return merged


def _sized(path: str) -> bool:
    try:
        return os.path.getsize(path) > 0
    except FileNotFoundError:  # its worker exited, and the launcher's cleanup took it
        return False


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The process's metrics (every worker's, under gunicorn), in Prometheus' text
    format, then what ``FLASHSALE_METRICS_COLLECTORS`` read now. Served on the
    instances' own ports for Prometheus to scrape; nginx does not pass ``/metrics``
    on, so nothing outside the stack reads it."""
    timings_flush()  # this worker's; the others' are at most FLUSH_EVERY old
    if workers := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        counted = CollectorRegistry()
        counted.register(_WorkersCollector(workers))
        # The server's processes: this worker's parent, the server's master, and its children.
        counted.register(InstanceCollector(os.getppid()))
    else:
        counted = REGISTRY
    read_now = CollectorRegistry()
    read_now.register(SourcesRead([import_string(path)() for path in settings.FLASHSALE_METRICS_COLLECTORS]))
    return HttpResponse(generate_latest(counted) + generate_latest(read_now),
                        content_type=CONTENT_TYPE_LATEST)


class NamedCollector(Protocol):
    """A collector of ``FLASHSALE_METRICS_COLLECTORS``: named in ``flashsale_collector_up``."""

    name: str

    def collect(self) -> Iterable[Metric]: ...


class SourcesRead:
    """The collectors that read a source at the scrape (Redis, the database), and
    ``flashsale_collector_up``: 1 for each that read it, 0 for one that could not.
    A collector that fails yields none of its series, so an alert on them would go
    quiet exactly when their source fails: the rules watch this gauge instead. Any
    failure counts (logged), so that no scrape fails on a collector's."""

    def __init__(self, collectors: list[NamedCollector]) -> None:
        self.collectors = collectors

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("flashsale_collector_up", "Whether the collector read its source at this "
                               "scrape (0: its series are missing from it)", labels=["collector"])
        for collector in self.collectors:
            try:
                families = list(collector.collect())
            except Exception as e:  # any failure: this gauge's 0, logged
                logger.warning("%s: not read for /metrics: %s", collector.name, e)
                up.add_metric([collector.name], 0)
                continue
            up.add_metric([collector.name], 1)
            yield from families
        yield up


class InstanceCollector:
    """What an instance's server uses, read from ``/proc`` at the scrape: its master
    (``master``, the PID) and every child of it, the workers. prometheus-client's
    multiprocess mode serves no ``process_*`` metrics (each worker has its own), and
    the instance's share of the machine is what saturates. CPU counts the children
    the master has reaped too (their ``cutime``), so it only falls when a worker
    ends and is not yet reaped."""

    def __init__(self, master: int) -> None:
        self.master = master

    def collect(self) -> Iterator[Metric]:
        try:
            cpu, rss, processes = instance_usage(self.master)
        except OSError as e:  # the master gone (the instance stopping), or no /proc
            logger.warning("the instance's usage was not read for /metrics: %s", e)
            return
        yield CounterMetricFamily("flashsale_instance_cpu_seconds", "CPU time of the instance's server: its "
                                  "master, its workers, and the workers it reaped", value=cpu)
        yield GaugeMetricFamily("flashsale_instance_resident_memory_bytes",
                                "Resident memory of the instance's server, its master and its workers",
                                value=rss)
        yield GaugeMetricFamily("flashsale_instance_processes",
                                "The instance's server's processes, its master and its workers",
                                value=processes)


_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> list[str]:
    """``/proc/<pid>/stat``'s fields after the process's name (which may hold spaces):
    state first, so ppid is [1], utime [11], stime [12], cutime [13], cstime [14], rss [21]."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()


def _children(master: int) -> list[int]:
    children = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if int(_stat(int(name))[1]) == master:
                    children.append(int(name))
            except (OSError, IndexError, ValueError):
                continue  # it ended while read
    return children


def instance_usage(master: int) -> tuple[float, int, int]:
    """CPU seconds, resident bytes and processes of ``master`` and its children."""
    own = _stat(master)
    cpu = sum(int(own[i]) for i in (11, 12, 13, 14))  # its own, and its reaped children's
    rss, processes = int(own[21]), 1
    for child in _children(master):
        try:
            fields = _stat(child)
        except OSError:
            continue
        cpu += int(fields[11]) + int(fields[12])
        rss += int(fields[21])
        processes += 1
    return cpu / _TICKS, rss * _PAGE, processes


# --- a process of its own: a persister, the race runner ---------------------------


def metrics_arguments(parser: ArgumentParser) -> None:
    """A management command's ``--metrics-port`` and ``--metrics-address``: where a
    process outside gunicorn serves its own /metrics (``metrics_served``)."""
    parser.add_argument("--metrics-port", type=int, default=None,
                        help="serve /metrics at this port, for Prometheus (default: none)")
    parser.add_argument("--metrics-address", default="127.0.0.1",
                        help="the address /metrics listens on (default 127.0.0.1; a container: 0.0.0.0)")


def metrics_served(*, metrics_port: int | None, metrics_address: str) -> None:
    """Serve this process's registry at ``/metrics`` from a thread, if a port was given."""
    if metrics_port is not None:
        start_http_server(metrics_port, addr=metrics_address)


logger = logging.getLogger(__name__)


def count(counter: Counter, *labels: str, amount: float = 1) -> None:
    """One more in ``counter``'s series of ``labels``, written now. Counted after the
    work it counts (a purchase committed, a lock taken): a metrics file that cannot be
    written (its directory gone, the disk full) is logged, and costs the figure only.
    ``FLASHSALE_METRICS=false`` counts nothing (to measure what counting costs)."""
    if not settings.FLASHSALE_METRICS:
        return
    try:
        (counter.labels(*labels) if labels else counter).inc(amount)
    except OSError:
        logger.warning("a count was not written for /metrics", exc_info=True)


# --- timings, written off the request's path ---------------------------------------

# prometheus-client writes every value of a multiprocess worker under one lock per
# process. A histogram's observation is two writes; made on a request's thread, a
# thread that lost the GIL while holding that lock stalls the others (the purchases'
# tail latency showed it: docs/reference/metrics.md). So a request appends its
# timings here (a deque's append takes no lock a request thread waits on), and one
# thread per process writes them, every FLUSH_EVERY seconds, and before a scrape
# that this process answers. A counter is still written at once: exact, even for a
# worker SIGKILLed a moment later; a timing may be lost with it, a second's worth.
FLUSH_EVERY = 1.0

_timings: deque[tuple[Histogram, tuple[str, ...], float]] = deque()
_writer_pid: int | None = None
_writer_mutex = threading.Lock()


def observe_later(histogram: Histogram, labels: tuple[str, ...], seconds: float) -> None:
    """Observe ``seconds`` in ``histogram``'s series of ``labels``, within FLUSH_EVERY
    seconds, from a thread that is not this one."""
    if not settings.FLASHSALE_METRICS:
        return
    _timings.append((histogram, labels, seconds))
    if _writer_pid != os.getpid():  # the first timing of this process (a forked worker's too)
        _writer_start()


# Requests this process serves now: one entry each, appended as it starts and popped
# as it ends (a deque's append and pop take no lock a request thread waits on); the
# writer sets the gauge from it with the timings, and a scrape this process answers
# first. Summed over the live workers: the instance's.
_flying: deque[None] = deque()
_in_flight: Gauge | None = None


def _in_flight_gauge() -> Gauge:
    """The gauge, made at its first write: a gauge without labels makes its value file
    as it is made, and a process that serves no request (``manage.py migrate``) may
    have no metrics directory to make it in."""
    global _in_flight
    with _writer_mutex:  # the writer's thread and a scrape may both be first
        if _in_flight is None:
            _in_flight = Gauge("flashsale_requests_in_flight",
                               "Requests the instance serves now (each worker's count as it last wrote it, "
                               "at most a second old), summed over its workers", multiprocess_mode="livesum")
    return _in_flight


def request_started() -> None:
    """A request begins on this thread (``request_ended`` when it is answered)."""
    if not settings.FLASHSALE_METRICS:
        return
    _flying.append(None)
    if _writer_pid != os.getpid():
        _writer_start()


def request_ended() -> None:
    if settings.FLASHSALE_METRICS and _flying:
        _flying.pop()


def timings_flush() -> None:
    """Write every timing recorded so far in this process, and the requests it serves
    now: the writer's round, a scrape's first step, a worker's last
    (``flashsale.gunicorn``, or the finalizer ``_writer_start`` registers)."""
    try:
        if _in_flight is not None or _flying:  # nothing served yet: nothing to say
            _in_flight_gauge().set(len(_flying))
    except OSError:
        logger.warning("the requests in flight were not written for /metrics", exc_info=True)
    while True:
        try:
            histogram, labels, seconds = _timings.popleft()
        except IndexError:
            return
        try:
            histogram.labels(*labels).observe(seconds)
        except OSError:
            # A metrics file that cannot be written (its directory gone, the disk
            # full) costs the figures, never the requests or this thread.
            logger.warning("a timing was not written for /metrics", exc_info=True)


def _writer_start() -> None:
    global _writer_pid
    with _writer_mutex:
        if _writer_pid == os.getpid():
            return
        _writer_pid = os.getpid()
        threading.Thread(target=_writer, name="metrics-timings", daemon=True).start()
        # What is left is written as the process leaves: gunicorn's workers call
        # worker_exit (flashsale.gunicorn); granian's are multiprocessing's children,
        # which leave by os._exit after multiprocessing's finalizers, never atexit's.
        multiprocessing.util.Finalize(None, timings_flush, exitpriority=0)


def _writer() -> None:
    while True:
        time.sleep(FLUSH_EVERY)
        timings_flush()
