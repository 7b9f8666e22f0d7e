import pytest
from django.test import override_settings


@pytest.mark.django_db
def test_healthz_reports_each_backend(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"instance": "test", "strategy": "atomic", "database": "ok",
                               "redis": "ok", "zookeeper": "ok"}


@pytest.mark.django_db
@override_settings(ZOOKEEPER_HOSTS="127.0.0.1:1")
def test_healthz_names_the_backend_that_is_down(client):
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["database"] == "ok" and body["redis"] == "ok"
    assert body["zookeeper"].startswith("ConnectionError: 127.0.0.1:1: ")
    assert "Connection refused" in body["zookeeper"]


@pytest.mark.django_db
def test_healthz_is_content_with_one_live_ensemble_member(client, settings):
    settings.ZOOKEEPER_HOSTS = f"127.0.0.1:1,{settings.ZOOKEEPER_HOSTS}"
    assert client.get("/healthz").json()["zookeeper"] == "ok"


def test_ping_touches_no_backend(client):
    assert client.get("/api/ping").json() == {"instance": "test"}
