"""``manage.py expire_orders`` as it runs beside the apps: its loop's heartbeat."""

import pytest

from common.testing import alive_file_touches

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_running_expirer_touches_its_alive_file_at_every_turn(tmp_path, monkeypatch):
    """Its liveness probe reads the file's age: each turn of the loop touches it, so a
    loop that stops turning is seen, though the metrics thread still answers."""
    touched = alive_file_touches("expire_orders", tmp_path / "alive", monkeypatch, interval=0.05)
    assert len(touched) == 3, touched  # a file touched again and again, as the loop turned
