"""The dashboard page hands the browser its panels; every panel asks for a recorded
rule or a metric the stack exports (the browser test draws them from a race)."""

import json
import re

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
