"""One request followed through the app's log (common.requestlog): every line it
causes is JSON with its name, and its answer names it; the name is nginx's when
nginx gave one (tests/test_requestlog.py follows one through both logs)."""

import io
import json
import logging

import pytest
from django.test import override_settings


@pytest.fixture
def app_log():
    """What the apps' console handler writes, as JSON lines, while the test runs."""
    [console] = [h for h in logging.getLogger().handlers if getattr(h, "name", None) == "console"]
    buffer = io.StringIO()
    previous = console.setStream(buffer)
    yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines()]
    console.setStream(previous)


@pytest.mark.django_db
@override_settings(FLASHSALE_ADMIN_TOKEN="test-token")
def test_an_admin_action_is_one_json_line_named_as_its_answer(client, app_log):
    response = client.post("/api/admin/products/log-1/reset", {"stock": 5}, content_type="application/json",
                           HTTP_AUTHORIZATION="Token test-token", HTTP_X_REQUEST_ID="abc123")
    assert response.status_code == 200 and response["X-Request-ID"] == "abc123"
    [line] = [line for line in app_log() if line.get("action") == "reset"]
    assert line["request_id"] == "abc123" and line["level"] == "INFO"
    assert line["details"] == {"sku": "log-1", "stock": "5"} and line["logger"] == "orders.auth"


@pytest.mark.django_db
def test_a_request_without_a_well_formed_name_is_given_one(client):
    for given in ({}, {"HTTP_X_REQUEST_ID": "no spaces allowed"}, {"HTTP_X_REQUEST_ID": "x" * 65}):
        name = client.get("/api/ping", **given)["X-Request-ID"]
        assert len(name) == 32 and int(name, 16) >= 0
