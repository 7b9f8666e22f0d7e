"""A persister started while the gate's Redis refuses writes waits for it, as its loop
waits out a failed round, instead of dying before its first round: a redis-server of
its own, with ``min-replicas-to-write 1`` and no replica, answers every write
NOREPLICAS until told otherwise."""

import logging
import threading

import pytest
from django.test import override_settings

from orders.gate.persister import Persister
from orders.gate.store import OLD_LIST
from stack.scratch import start_redis

pytestmark = pytest.mark.server


@pytest.fixture
def refusing():
    server = start_redis("--min-replicas-to-write", "1")
    try:
        with override_settings(FLASHSALE_GATE_REDIS_URL=server.url, FLASHSALE_GATE_REDIS_CLUSTER=False,
                               FLASHSALE_GATE_REDIS_SENTINELS=[]):
            yield server
    finally:
        server.stop()


def test_a_persister_started_while_redis_refuses_writes_waits_then_moves_the_old_list(refusing, caplog):
    client = refusing.client(decode_responses=True)
    client.config_set("min-replicas-to-write", "0")
    client.sadd(OLD_LIST, "sku-gone")  # the list's earlier form, which the start moves and deletes
    client.config_set("min-replicas-to-write", "1")
    started = {}
    stop = threading.Event()
    starting = threading.Thread(target=lambda: started.setdefault("persister", Persister("p", stop=stop)))
    with caplog.at_level(logging.WARNING, logger="orders.gate.persister"):
        starting.start()
        starting.join(1.5)
        assert starting.is_alive() and "persister" not in started  # still waiting, not dead
        assert "NOREPLICAS" in caplog.text and "trying again" in caplog.text
        assert client.exists(OLD_LIST)
        client.config_set("min-replicas-to-write", "0")
        starting.join(5)
    stop.set()
    assert not starting.is_alive() and "persister" in started
    assert not client.exists(OLD_LIST)
