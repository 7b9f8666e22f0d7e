"""``manage.py schema_ready``, as the apps' init container runs it: against the
stack's MariaDB, against a database without the schema, and with the database away,
where under the gate the mark an earlier answer left in the gate's Redis decides."""

import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.db import connection

from orders.gate.schema import MARK, migrations_digest
from orders.gate.store import gate_redis

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def url(name: str | None = None, *, port: int | None = None) -> str:
    """This test's database (or ``name`` on the same server), as DATABASE_URL says it."""
    s = connection.settings_dict
    return f"mysql://{s['USER']}:{s['PASSWORD']}@{s['HOST']}:{port or s['PORT']}/{name or s['NAME']}"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def schema_ready(database: str, strategy: str = "gate") -> subprocess.CompletedProcess:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "flashsale.settings.test", "DATABASE_URL": database,
           "FLASHSALE_STRATEGY": strategy}
    return subprocess.run([sys.executable, "manage.py", "schema_ready"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_under_the_gate_a_pod_starts_without_the_database_once_an_answer_marked_its_migrations():
    gate_redis().delete(MARK)
    away = url(port=closed_port())
    first = schema_ready(away)
    assert first.returncode == 1 and "nothing vouches" in first.stderr, first.stderr
    # The database answers: every migration applied, and the gate's Redis marked.
    applied = schema_ready(url())
    assert applied.returncode == 0 and "applied" in applied.stdout, applied.stderr
    assert gate_redis().get(MARK) == migrations_digest()
    marked = schema_ready(away)
    assert marked.returncode == 0 and "marks this code's migrations" in marked.stdout, marked.stderr
    # A deployment that sells from the database waits for it, mark or none.
    assert schema_ready(away, strategy="atomic").returncode == 1


def test_a_mark_of_other_migrations_vouches_for_nothing():
    gate_redis().set(MARK, "0" * 16)  # an earlier release's
    assert schema_ready(url(port=closed_port())).returncode == 1


def test_a_database_without_this_codes_migrations_keeps_the_pod_waiting():
    empty = f"test_flashsale_schema_{uuid.uuid4().hex[:8]}"  # the test databases' grant
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {empty}")
    try:
        gate_redis().set(MARK, migrations_digest())
        pending = schema_ready(url(empty))
        assert pending.returncode == 1 and "lacks migrations" in pending.stderr, pending.stderr
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE {empty}")
