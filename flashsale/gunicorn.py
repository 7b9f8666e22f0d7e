"""gunicorn's settings for the app instances (``--config=python:flashsale.gunicorn``,
given by ``flashsale.serve``, which also empties the metrics directory before):
the hooks that keep prometheus-client's multiprocess files true (``common.metrics``).
The command line sets everything else."""

import atexit
import os
import sys

from prometheus_client import multiprocess


def worker_exit(server, worker):
    """In the worker, as it leaves: the timings it has not written yet
    (``common.metrics.observe_later``)."""
    from common.metrics import timings_flush

    timings_flush()
    if os.getpid() == worker.pid and worker.booted and not worker.alive:
        _leave_now(0)  # told to stop; one that failed to boot leaves with the code that says so


def on_exit(server):
    """The master, its workers gone, leaves as they do, with the status it halts with
    (the exception its main loop handles: a worker that failed to boot is not 0)."""
    _leave_now(getattr(sys.exc_info()[1], "exit_status", 0))


def _leave_now(status: int) -> None:
    """Leave once atexit's handlers ran (the ZooKeeper session closed, the logs
    flushed), without the interpreter's teardown of Django's modules, which only costs
    time: the master waits for its workers', the stack for the master's, and a strategy
    switch's new instances hold their purchases until the old have stopped. granian's
    workers leave by os._exit too."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def child_exit(server, worker):
    """A worker gone (restarted, killed): its counters stay in the sum, its live
    gauges leave it."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(worker.pid)
