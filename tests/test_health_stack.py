"""What a stopped server does to the probes, on the stack through nginx: a load
balancer keeps every instance of a deployment whose strategy never uses it."""

import pytest
import requests

from stack.control import start_again
from stack.supervisor import Supervisor
from tests.test_prometheus import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.exclusive]  # ZooKeeper stopped


def _probe(client, path: str) -> requests.Response:
    return requests.get(f"{client.base_url}{path}", timeout=10)


def _zookeeper_seen_down(client, instances: int) -> bool:
    """Every instance of the round robin says ZooKeeper is down (``/healthz``): each
    worker reads its kept session's state as kazoo last found it, no round trip, so a
    busy machine's workers learn of the stop a moment after it, not at once."""
    return all(_probe(client, "/healthz").json()["backends"]["zookeeper"] == "down"
               for _ in range(2 * instances))


def test_readyz_keeps_an_instance_whose_strategy_needs_no_zookeeper_while_it_is_stopped(
        stack_apps, stack_config):
    supervisor = Supervisor(stack_config)
    atomic = stack_apps(strategy="atomic")
    sku = "readyz-without-zk"
    atomic.reset(sku, 5)
    supervisor.stop("zookeeper")
    try:
        eventually(lambda: _zookeeper_seen_down(atomic, stack_config.instances), seconds=10, every=0.2)
        for _ in range(2 * stack_config.instances):  # each instance of the round robin
            ready = _probe(atomic, "/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["backends"] == {"database": "ok"}
            every = _probe(atomic, "/healthz")
            assert every.status_code == 503 and every.json()["backends"]["zookeeper"] == "down"
            assert _probe(atomic, "/livez").status_code == 200
        assert atomic.order(sku, 1, "u1").status_code == 201  # and it sells
    finally:
        start_again(stack_config, ["zookeeper"])  # and ready, before the next test asks for it


def test_readyz_drops_an_instance_whose_strategy_needs_zookeeper_while_it_is_stopped(
        stack_apps, stack_config):
    supervisor = Supervisor(stack_config)
    zookeeper = stack_apps(strategy="zookeeper")
    # Ready before the fault, each instance: a session that the test before cut off
    # (the chaos tests' zk-leader) comes back within a second of ZooKeeper, not at once.
    def every_instance_ready() -> bool:
        return all(_probe(zookeeper, "/readyz").json()["backends"] == {"database": "ok", "zookeeper": "ok"}
                   for _ in range(2 * stack_config.instances))  # each instance of the round robin

    eventually(every_instance_ready, seconds=10, every=0.2)
    assert every_instance_ready()
    supervisor.stop("zookeeper")
    try:
        eventually(lambda: _zookeeper_seen_down(zookeeper, stack_config.instances), seconds=10, every=0.2)
        for _ in range(2 * stack_config.instances):
            ready = _probe(zookeeper, "/readyz")
            assert ready.status_code == 503
            assert ready.json()["backends"] == {"database": "ok", "zookeeper": "down"}
            assert _probe(zookeeper, "/livez").status_code == 200  # alive: not to be restarted
    finally:
        start_again(stack_config, ["zookeeper"])  # and ready, before the next test asks for it
