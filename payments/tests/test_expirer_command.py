"""``manage.py expire_orders`` as it runs beside the apps: its loop's heartbeat."""

import signal
import threading
import time

import pytest
from django.core.management import call_command
from django.db import connection

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_running_expirer_touches_its_alive_file_at_every_turn(tmp_path, monkeypatch):
    """Its liveness probe reads the file's age: each turn of the loop touches it, so a
    loop that stops turning is seen, though the metrics thread still answers."""
    alive = tmp_path / "alive"
    handlers = {}  # the command's SIGTERM handler, called here instead of a signal
    monkeypatch.setattr(signal, "signal", lambda signum, handler: handlers.setdefault(signum, handler))
    touched: list[int] = []

    def watch() -> None:
        deadline = time.monotonic() + 30
        while len(touched) < 3 and time.monotonic() < deadline:
            if alive.exists() and (not touched or alive.stat().st_mtime_ns != touched[-1]):
                touched.append(alive.stat().st_mtime_ns)
            time.sleep(0.005)
        while signal.SIGTERM not in handlers and time.monotonic() < deadline:
            time.sleep(0.005)
        handlers[signal.SIGTERM](signal.SIGTERM, None)
        connection.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        call_command("expire_orders", interval=0.05, alive_file=alive)
    finally:
        watcher.join()
    assert len(touched) == 3, touched  # a file touched again and again, as the loop turned
