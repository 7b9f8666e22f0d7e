"""Prometheus metrics: what every process of the stack serves at ``/metrics``.

Under gunicorn a request reaches one of several worker processes, so a worker's own
counters are a share of the instance's. prometheus-client's multiprocess mode keeps
every worker's values in files under ``PROMETHEUS_MULTIPROC_DIR``, which the stack's
launcher sets per instance; a scrape, whichever worker answers it, sums the files.
The directory is emptied when gunicorn's master starts (a file of an earlier run's
process would be summed too), and a worker that exits is marked dead, so its
counters stay in the sum while its live gauges leave it (``flashsale.gunicorn``).
Without the variable (the test client, ``manage.py`` commands) a process serves its
own registry.

Labels are bounded sets (a strategy, an answer's code), never a sku, a user or a
key: each value of a label is a series Prometheus keeps.
"""

from __future__ import annotations

import os

from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The process's metrics (every worker's, under gunicorn), in Prometheus' text
    format. Served on the instances' own ports for Prometheus to scrape; nginx does
    not pass ``/metrics`` on, so nothing outside the stack reads it."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
