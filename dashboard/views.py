"""``/dashboard``: a sale as Prometheus sees it, for a projector during ``make demo``,
``make race`` or a comparison. The browser asks Prometheus' HTTP API itself, through
nginx (``/prometheus/api/v1/query_range`` and ``query``, nothing else of it); this
view only hands it the panels."""

from django.shortcuts import render

from .panels import PANELS


def dashboard(request):
    return render(request, "dashboard/dashboard.html", {"panels": [panel.as_dict() for panel in PANELS]})
