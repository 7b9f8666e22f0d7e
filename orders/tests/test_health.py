"""/livez, /readyz and /healthz on the real servers; what a stopped server does to
them: ``tests/test_health_stack.py``."""

import pytest
from django.db import connection
from django.test import override_settings

from orders import health

EVERY = {"database": "ok", "redis": "ok", "zookeeper": "ok", "redis-gate": "ok"}


def test_livez_asks_no_backend(client, monkeypatch):
    monkeypatch.setattr(health, "_database", None)  # would fail if asked
    assert client.get("/livez").json() == {"instance": "test"}


@pytest.mark.django_db
def test_healthz_reports_every_backend_and_nothing_else(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"instance": "test", "strategy": "atomic", "backends": EVERY}


@pytest.mark.django_db
@pytest.mark.parametrize(("strategy", "backends"), [
    ("atomic", ["database"]),
    ("none", ["database"]),
    ("mysql-for-update", ["database"]),
    ("local", ["database"]),
    ("setnx", ["database", "redis"]),
    ("redisson-fair", ["database", "redis"]),
    ("zookeeper", ["database", "zookeeper"]),
    ("gate", ["redis-gate", "redis"]),
])
def test_readyz_asks_the_backends_the_strategy_sells_with(client, strategy, backends):
    with override_settings(FLASHSALE_STRATEGY=strategy):
        response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"instance": "test", "strategy": strategy,
                               "backends": dict.fromkeys(backends, "ok")}


@pytest.mark.django_db
def test_a_server_down_is_named_and_its_error_is_logged_not_answered(client, settings, caplog):
    settings.FLASHSALE_GATE_REDIS_URL = "redis://127.0.0.1:1/0"
    health._gate = None
    try:
        with override_settings(FLASHSALE_STRATEGY="gate"):
            ready = client.get("/readyz")
        every = client.get("/healthz")
    finally:
        health._gate = None
    assert ready.status_code == 503 and every.status_code == 503
    assert ready.json()["backends"] == {"redis-gate": "down", "redis": "ok"}
    assert every.json()["backends"] == {**EVERY, "redis-gate": "down"}
    assert "127.0.0.1:1" not in ready.content.decode() + every.content.decode()
    assert "health: redis-gate is down: ConnectionError: " in caplog.text
    assert "127.0.0.1:1" in caplog.text


@pytest.mark.django_db
def test_a_database_down_leaves_a_gate_instance_ready_and_no_other(client, monkeypatch):
    """A gate purchase is decided in Redis and written later: a MariaDB restart must
    not take a gate sale's instances out of their Service."""
    class Down:
        def check(self):
            raise health.MySQLdb.OperationalError(2002, "Can't connect")

    monkeypatch.setattr(health, "_database", Down())
    with override_settings(FLASHSALE_STRATEGY="gate"):
        assert client.get("/readyz").status_code == 200
    with override_settings(FLASHSALE_STRATEGY="atomic"):
        down = client.get("/readyz")
    assert down.status_code == 503 and down.json()["backends"] == {"database": "down"}


@pytest.mark.django_db
def test_the_database_is_asked_on_one_kept_connection(client, monkeypatch):
    made = []
    real = health.MySQLdb.connect
    monkeypatch.setattr(health, "_database", health._KeptDatabase())
    monkeypatch.setattr(health.MySQLdb, "connect", lambda **params: made.append(params) or real(**params))
    for _ in range(3):
        assert client.get("/readyz").status_code == 200
    assert len(made) == 1 and made[0]["read_timeout"] == 1


@pytest.mark.django_db
def test_a_kept_connection_the_server_dropped_is_not_a_database_down(client, monkeypatch):
    """A restart of MariaDB breaks every process's kept connection; the server, back,
    is ready, and the next check says so rather than the broken connection's error."""
    made = []
    real = health.MySQLdb.connect
    kept = health._KeptDatabase()
    monkeypatch.setattr(health, "_database", kept)
    monkeypatch.setattr(health.MySQLdb, "connect", lambda **params: made.append(params) or real(**params))
    assert client.get("/readyz").status_code == 200
    assert kept._connection is not None
    with connection.cursor() as cursor:  # as a restart drops it, from the server's side
        cursor.execute("KILL CONNECTION %s", [kept._connection.thread_id()])
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.json()
    assert len(made) == 2


def test_ping_touches_no_backend(client):
    assert client.get("/api/ping").json() == {"instance": "test"}
