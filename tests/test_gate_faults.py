"""The gate on the running stack, while a server fails: MariaDB down mid-sale (the
gate sells on, the backlog waits and drains), Redis crashed and restarted from its
append-only file under each fsync policy (what an accepted order survives).

Faults are real: SIGKILL to the server's process group, then a start by supervisord.
The persisters are paused (SIGSTOP) where the test needs accepted orders to exist in
Redis alone when the fault strikes, and always resumed.
"""

from __future__ import annotations

import uuid

import pytest
import redis

from orders.gate import gate_keys
from stack.control import start_again
from stack.supervisor import Supervisor

pytestmark = pytest.mark.e2e


def sell(client, sku: str, count: int) -> dict[str, int]:
    """``count`` purchases, each with its own key; the accepted ones' order ids by key."""
    accepted = {}
    for i in range(count):
        key = f"{sku}-{i}"
        response = client.order(sku, 1, f"buyer-{i}", key=key)
        assert response.status_code == 201, response.text
        assert response.json()["status"] == "accepted"
        accepted[key] = response.json()["order_id"]
    return accepted


def test_the_gate_sells_while_mariadb_is_down_and_its_backlog_drains_after(
        stack_config, stack_apps, reconnect_afterwards):
    client = stack_apps(strategy="gate")
    sku = f"gate-db-down-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 50)
    stack_redis = redis.Redis(port=stack_config.redis_port, decode_responses=True)
    Supervisor(stack_config).kill("mariadb")
    try:
        accepted = sell(client, sku, 20)  # no database on the gate's path
        sale = stack_redis.hgetall(gate_keys(sku).sale)
        assert (sale["stock"], sale["accepted"]) == ("30", "20")
    finally:
        start_again(stack_config, ["mariadb"])
    audit = client.audit(sku, settle=60)  # the persisters write the backlog once it is back
    assert (audit["orders"], audit["remaining"], audit["gate"]["backlog"]) == (20, 30, 0), audit
    assert audit["consistent"] and audit["gate"]["reconciled"], audit
    for order_id in accepted.values():
        assert client.session.get(f"{client.base_url}/api/orders/{order_id}").json()["status"] == "confirmed"


@pytest.mark.parametrize("fsync", ["always", "everysec"])
def test_accepted_orders_survive_a_redis_crash_from_its_append_only_file(
        stack_config, stack_apps, fsync, record_property):
    client = stack_apps(strategy="gate")
    sku = f"gate-redis-crash-{fsync}-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 50)
    stack_redis = redis.Redis(port=stack_config.redis_port, decode_responses=True)
    before = stack_redis.config_get("appendfsync")["appendfsync"]
    stack_redis.config_set("appendfsync", fsync)
    try:
        sup = Supervisor(stack_config)
        with sup.paused(stack_config.persister_names):  # the accepted orders are in Redis alone
            accepted = sell(client, sku, 20)
            sup.kill("redis")
            start_again(stack_config, ["redis"])  # from its AOF (the config file's policy again)
    finally:
        stack_redis.config_set("appendfsync", before)
    audit = client.audit(sku, settle=60)
    confirmed = {key: client.session.get(f"{client.base_url}/api/orders/{order_id}").json().get("status")
                 for key, order_id in accepted.items()}
    lost = [key for key, status in confirmed.items() if status != "confirmed"]
    record_property("orders lost to a Redis crash under appendfsync " + fsync, len(lost))
    print(f"appendfsync {fsync}: {len(lost)} of {len(accepted)} accepted orders lost to a Redis crash")
    # Whatever Redis kept, it kept whole: its stock, its stream and MySQL agree.
    assert audit["consistent"] and audit["gate"]["reconciled"], audit
    assert audit["orders"] == len(accepted) - len(lost)
    if fsync == "always":
        assert lost == []  # every answer's write reached the disk before the answer
