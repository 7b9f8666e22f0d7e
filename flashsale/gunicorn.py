"""gunicorn's settings for the app instances (``--config=python:flashsale.gunicorn``,
given by ``flashsale.serve``, which also empties the metrics directory before):
the hooks that keep prometheus-client's multiprocess files true (``common.metrics``).
The command line sets everything else."""

import os

from prometheus_client import multiprocess


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
