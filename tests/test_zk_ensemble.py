"""A 3-node ZooKeeper ensemble from the launcher (ZK_NODES=3), and the zookeeper
strategy selling correctly before and after its leader is stopped."""

from __future__ import annotations

import time

import pytest

from loadtest.burst import burst
from loadtest.client import FlashsaleClient
from stack.servers import zookeeper_mode
from stack.supervisor import Supervisor

from .second_stack import config_for, stack

pytestmark = pytest.mark.e2e

ENSEMBLE = {"ZK_NODES": "3", "FLASHSALE_STRATEGY": "zookeeper"}


def modes(ports: dict[str, int]) -> dict[str, str]:
    found = {}
    for name, port in ports.items():
        try:
            mode = zookeeper_mode(port)
        except OSError:
            continue  # stopped
        if mode is not None:
            found[name] = mode
    return found


def sell(client: FlashsaleClient, sku: str, stock: int = 20) -> dict:
    client.reset(sku, stock)
    result = burst(base_url=client.base_url, sku=sku, attempts=60, concurrency=8, tokens=client.tokens)
    audit = client.audit(sku)
    assert result.errors == 0, result.statuses
    assert (audit["orders"], audit["remaining"], audit["consistent"]) == (stock, 0, True), audit
    return audit


def test_the_zookeeper_strategy_keeps_selling_when_the_leader_stops(second_run_dir):
    up = stack(second_run_dir, "up", **ENSEMBLE)
    assert up.returncode == 0, up.stdout + up.stderr
    config = config_for(second_run_dir, **ENSEMBLE)
    ports = {f"zk{i + 1}": config.zk_port + i for i in range(3)}
    before = modes(ports)
    assert sorted(before.values()) == ["follower", "follower", "leader"], before
    client = FlashsaleClient.for_stack(config)
    sell(client, "ensemble-before")

    leader = next(name for name, mode in before.items() if mode == "leader")
    Supervisor(config).stop(leader)
    deadline = time.monotonic() + 30
    after = {}
    while time.monotonic() < deadline:
        after = modes(ports)
        if sorted(after.values()) == ["follower", "leader"]:
            break
        time.sleep(0.2)
    assert leader not in after and sorted(after.values()) == ["follower", "leader"], after

    sell(client, "ensemble-after")  # two of three: still a quorum
    down = stack(second_run_dir, "down")
    assert down.returncode == 0, down.stderr
