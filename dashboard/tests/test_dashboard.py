"""The dashboard page hands the browser its panels; every panel asks for a recorded
rule or a metric the stack exports (the browser test draws them from a race)."""

import json
import re
import socket
import time

import pytest
import yaml

from dashboard.panels import PANELS
from stack.config import ROOT

RECORDED = {rule["record"] for group in yaml.safe_load((ROOT / "monitoring/rules.yml").read_text())["groups"]
            for rule in group["rules"] if "record" in rule}


@pytest.mark.django_db
def test_the_page_carries_every_panel_and_is_linked_from_the_shop_and_the_race(client):
    response = client.get("/dashboard")
    assert response.status_code == 200
    listed = json.loads(re.search(r'<script id="panel-list" type="application/json">(.*?)</script>',
                                  response.content.decode(), re.S).group(1))
    assert [panel["key"] for panel in listed] == [panel.key for panel in PANELS]
    for page in ("/", "/race"):
        assert 'href="/dashboard"' in client.get(page).content.decode()


def test_every_query_asks_for_a_recorded_rule_or_an_exported_gauge():
    for panel in PANELS:
        for query in panel.queries:
            names = set(re.findall(r"[a-zA-Z_:][\w:]*", query.expr)) - {"max", "sum", "by"}
            assert names and all(name in RECORDED or name.startswith("flashsale_gate_") for name in names), \
                (panel.key, query.expr)


@pytest.mark.parametrize(("path", "status", "error"), [
    ("/dashboard/data/no-such-panel", 404, "not_found"),
    ("/dashboard/data/orders?window=61", 400, "invalid"),
    ("/dashboard/data/orders?window=300.0", 400, "invalid"),
    ("/dashboard/data/orders?window=" + "9" * 5000, 400, "invalid"),
])
def test_the_data_route_takes_only_a_panel_of_its_own_and_an_offered_window(client, path, status, error):
    response = client.get(path)
    assert response.status_code == status and response.json()["error"] == error


def test_without_a_prometheus_the_panels_are_503_json(client, settings):
    settings.FLASHSALE_PROMETHEUS_URL = ""
    response = client.get("/dashboard/data/orders")
    assert response.status_code == 503 and response.json()["error"] == "unavailable"
    assert response.json()["backend"] == "prometheus"


def test_a_range_ends_on_its_step_so_every_tab_in_a_step_asks_the_same():
    from dashboard.data import WINDOWS, panel_request

    step = WINDOWS[900]
    first, later, next_one = (panel_request(key="orders", window="900", now=now)
                              for now in (1002.0, 1002.0 + step - 0.1, 1002.0 + step))
    assert first.end == later.end == 1002 and next_one.end == 1002 + step and first.step == step
    assert panel_request(key="orders", window=None, now=1001.0).window == 300


@pytest.mark.server  # the shared cache holds the other tab's claim
def test_a_prometheus_that_hangs_costs_a_panel_request_its_budget_not_a_workers_seconds(client, settings):
    """Another tab is filling the panel's answer, and Prometheus accepts and never
    answers (stopped, or swamped: its kernel still completes each connection). The
    request waits for the fill and asks itself, all within the budget."""
    from django.core.cache import cache

    from dashboard.data import panel_request

    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(64)  # never accepted, never read
    settings.FLASHSALE_PROMETHEUS_URL = f"http://127.0.0.1:{hung.getsockname()[1]}"
    settings.FLASHSALE_PROMETHEUS_TIMEOUT_S = 1.0
    window = 3600  # a 24 s step: the request below falls in the same one
    end = panel_request(key="backlog", window=str(window)).end
    cache.add(f"dashboard:backlog:{window}:{end}:fill", 1, timeout=5)  # the other tab's claim
    try:
        started = time.monotonic()
        response = client.get(f"/dashboard/data/backlog?window={window}")
        took = time.monotonic() - started
    finally:
        hung.close()
    assert response.status_code == 503 and response.json()["backend"] == "prometheus"
    # A bound, not a figure: before, the wait for the fill took 2 s, then a query the
    # whole 1 s.
    assert took < 2.0
