"""gunicorn's settings for the app instances (``--config=python:flashsale.gunicorn``):
the hooks that keep prometheus-client's multiprocess files true (``common.metrics``).
The command line sets everything else."""

import os
import shutil
from pathlib import Path

from prometheus_client import multiprocess


def on_starting(server):
    """Before any worker: an empty directory, so a file an earlier run's worker left
    (a crash, a SIGKILL) is not summed into this run's counters."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        shutil.rmtree(directory, ignore_errors=True)
        Path(directory).mkdir(parents=True)


def worker_exit(server, worker):
    """In the worker, as it leaves: the timings it has not written yet
    (``common.metrics.observe_later``)."""
    from common.metrics import timings_flush

    timings_flush()


def child_exit(server, worker):
    """A worker gone (restarted, killed): its counters stay in the sum, its live
    gauges leave it."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(worker.pid)
