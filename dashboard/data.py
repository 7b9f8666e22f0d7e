"""The dashboard's panel data, asked of Prometheus by the server, never by the visitor.

A visitor names a panel and one of a few windows; the expressions are the panel's
own (``dashboard.panels``), the step is the window's, and the range ends at the last
whole step. Every instance keeps each answer in the shared cache under that end, so
all the tabs open in one step share one answer: the first to miss it takes a fill
flag and asks Prometheus; the others wait for its answer (half the budget, then ask
themselves). A hundred open tabs cost Prometheus what one costs.

A request holds one of the workers that sell, so all of it, the wait and every
query, fits in ``FLASHSALE_PROMETHEUS_TIMEOUT_S`` (2 s, well under a purchase's
deadline): past it, 503, and the tab asks again at its next refresh.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import requests
from django.conf import settings

from common.cache_errors import UNREADABLE, cache_awaited, cache_claimed, cache_read, cache_write
from common.errors import InvalidInput, NotFound, Unavailable

from .panels import PANELS, Panel

# window (seconds) -> step (seconds): about 150 points a line, whichever is asked.
WINDOWS = {60: 2, 300: 2, 900: 6, 3600: 24}
DEFAULT_WINDOW = 300
_KEEP_S = 10  # the key carries the step's end: an entry is read only during its step


@dataclass(frozen=True)
class PanelRequest:
    panel: Panel
    window: int
    step: int
    end: int  # epoch seconds, a multiple of the step: the range's last point


def panel_request(*, key: str, window: str | None, now: float | None = None) -> PanelRequest:
    """:raises NotFound: no such panel. :raises InvalidInput: a window not offered."""
    panel = next((p for p in PANELS if p.key == key), None)
    if panel is None:
        raise NotFound(f"no panel {key!r}", extra={"panels": [p.key for p in PANELS]})
    try:
        seconds = DEFAULT_WINDOW if window is None else int(window)
    except ValueError:
        seconds = -1
    if seconds not in WINDOWS:
        raise InvalidInput(f"window is one of {', '.join(map(str, WINDOWS))} (seconds)",
                           extra={"fields": {"window": ["not offered"]}})
    step = WINDOWS[seconds]
    end = math.floor((time.time() if now is None else now) / step) * step
    return PanelRequest(panel=panel, window=seconds, step=step, end=end)


def panel_data_get(*, request: PanelRequest) -> dict:
    """The panel's series (a graph: each line's points over the window) or rows (a
    table: each series' value at the end), from the shared cache or Prometheus.

    :raises Unavailable: Prometheus cannot be reached (or none is configured).
    """
    budget = settings.FLASHSALE_PROMETHEUS_TIMEOUT_S
    deadline = time.monotonic() + budget
    key = f"dashboard:{request.panel.key}:{request.window}:{request.end}"
    kept = cache_read(key)
    if kept is UNREADABLE:
        return _ask(request, deadline)
    if kept is not None:
        return kept
    if not cache_claimed(key, budget) and (kept := cache_awaited(key, wait_s=budget / 2)) is not None:
        return kept
    data = _ask(request, deadline)
    cache_write(key, data, _KEEP_S)
    return data


def _ask(request: PanelRequest, deadline: float) -> dict:
    panel = request.panel
    lines = []
    for query in panel.queries:
        if panel.kind == "table":
            result = _prometheus("query", {"query": query.expr, "time": request.end}, deadline)
            lines += [{"metric": r["metric"], "legend": query.legend, "value": r["value"][1]} for r in result]
        else:
            result = _prometheus("query_range", {"query": query.expr, "start": request.end - request.window,
                                                 "end": request.end, "step": request.step}, deadline)
            lines += [{"metric": r["metric"], "legend": query.legend, "values": r["values"]} for r in result]
    return {"panel": panel.key, "kind": panel.kind, "unit": panel.unit, "window": request.window,
            "step": request.step, "end": request.end, "lines": lines}


def _prometheus(api: str, params: dict, deadline: float) -> list:
    base = settings.FLASHSALE_PROMETHEUS_URL
    if not base:
        raise Unavailable("no Prometheus is configured (FLASHSALE_PROMETHEUS_URL)", backend="prometheus")
    left = deadline - time.monotonic()
    if left <= 0:
        raise Unavailable("Prometheus did not answer within the panel's budget", backend="prometheus")
    try:
        response = requests.get(f"{base.rstrip('/')}/api/v1/{api}", params=params, timeout=left)
        body = response.json()
    except (requests.RequestException, ValueError) as e:
        raise Unavailable(f"Prometheus did not answer: {type(e).__name__}", backend="prometheus") from e
    if body.get("status") != "success":
        # The expressions are ours: a refusal is Prometheus's limits, not the visitor's input.
        raise Unavailable(f"Prometheus refused the query: {body.get('error', response.status_code)}",
                          backend="prometheus")
    return body["data"]["result"]
