"""The gate on the running stack, while a server fails: MariaDB down mid-sale (the
gate sells on, the backlog waits and drains), the gate's Redis crashed and restarted
from its append-only file under each fsync policy (what an accepted order survives),
Django's cache flushed (nothing of the gate's goes with it), the gate's sale lost
from Redis (the audit says what it cannot know). Each sale is reset to the gate on the
instances as they run: a product's strategy is its own, whatever the deployment's.

Faults are real: SIGKILL to the server's process group, then a start by supervisord.
The persisters are paused (SIGSTOP) where the test needs accepted orders to exist in
Redis alone when the fault strikes, and always resumed.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
import redis

from orders.gate.store import gate_keys
from stack.config import ROOT
from stack.control import start_again
from stack.supervisor import Supervisor

pytestmark = [pytest.mark.e2e, pytest.mark.exclusive]  # MariaDB stopped, the Redis servers crashed


def signed_up(client, count: int) -> None:
    """``sell``'s buyers signed up now, while MariaDB is there to make them."""
    for i in range(count):
        client.as_buyer(f"buyer-{i}")


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
    client = stack_apps()
    sku = f"gate-db-down-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 50, strategy="gate")
    stack_redis = redis.Redis(port=stack_config.redis_gate_port, decode_responses=True)
    signed_up(client, 20)
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
        assert client.order_detail(order_id).json()["status"] == "confirmed"


@pytest.mark.parametrize("fsync", ["always", "everysec"])
def test_accepted_orders_survive_a_redis_crash_from_its_append_only_file(
        stack_config, stack_apps, fsync, record_property):
    client = stack_apps()
    sku = f"gate-redis-crash-{fsync}-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 50, strategy="gate")
    stack_redis = redis.Redis(port=stack_config.redis_gate_port, decode_responses=True)
    before = stack_redis.config_get("appendfsync")["appendfsync"]
    stack_redis.config_set("appendfsync", fsync)
    try:
        sup = Supervisor(stack_config)
        with sup.paused(stack_config.persister_names):  # the accepted orders are in Redis alone
            accepted = sell(client, sku, 20)
            sup.kill("redis-gate")
            start_again(stack_config, ["redis-gate"])  # from its AOF (the config file's policy again)
    finally:
        stack_redis.config_set("appendfsync", before)
    audit = client.audit(sku, settle=60)
    confirmed = {key: client.order_detail(order_id).json().get("status")
                 for key, order_id in accepted.items()}
    lost = [key for key, status in confirmed.items() if status != "confirmed"]
    record_property("orders lost to a Redis crash under appendfsync " + fsync, len(lost))
    print(f"appendfsync {fsync}: {len(lost)} of {len(accepted)} accepted orders lost to a Redis crash")
    # Whatever Redis kept, it kept whole: its stock, its stream and MySQL agree.
    assert audit["consistent"] and audit["gate"]["reconciled"], audit
    assert audit["orders"] == len(accepted) - len(lost)
    if fsync == "always":
        assert lost == []  # every answer's write reached the disk before the answer


def test_a_flush_of_djangos_cache_loses_no_accepted_order(stack_config, stack_apps):
    """An operator's ``cache.clear()`` (FLUSHDB of the cache's database) while the
    accepted orders wait in Redis alone: the gate's Redis is another server."""
    client = stack_apps()
    sku = f"gate-cache-clear-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 50, strategy="gate")
    sup = Supervisor(stack_config)
    with sup.paused(stack_config.persister_names):
        accepted = sell(client, sku, 30)
        clear = "from django.core.cache import cache; cache.clear()"
        flush = subprocess.run([sys.executable, "manage.py", "shell", "-c", clear], cwd=ROOT,
                               env=stack_config.app_environment("app1"), capture_output=True, text=True,
                               timeout=60)
        assert flush.returncode == 0, flush.stderr
        assert not redis.Redis(port=stack_config.redis_port).dbsize()  # the cache's database is empty
    audit = client.audit(sku, settle=60)
    assert (audit["orders"], audit["remaining"], audit["consistent"]) == (30, 20, True), audit
    for order_id in accepted.values():
        assert client.order_detail(order_id).json()["status"] == "confirmed"


def test_when_redis_lost_the_sale_the_audit_says_what_it_cannot_know(stack_config, stack_apps):
    client = stack_apps()
    sku = f"gate-lost-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 50, strategy="gate")
    sell(client, sku, 5)
    assert client.audit(sku, settle=60)["orders"] == 5
    sup = Supervisor(stack_config)
    with sup.paused(stack_config.persister_names):
        later = [client.order(sku, 1, f"late-{i}", key=f"{sku}-late-{i}") for i in range(3)]
        assert [r.status_code for r in later] == [201] * 3
        gate = redis.Redis(port=stack_config.redis_gate_port)
        gate.delete(*gate_keys(sku))  # what a restart without persistence leaves of this sale
        # Read while the persisters are still stopped: a persister blocked on the
        # stream was handed the late entries before they were lost, and writes them
        # once it runs again (their fate then becomes known).
        audit = client.audit(sku, settle=0)
    assert audit["orders"] == 5 and not audit["consistent"], audit
    assert audit["gate"]["redis_lost"] and audit["gate"]["unknown_units"] == 45, audit
    assert audit["gate"]["redis_remaining"] is None and audit["gate"]["loaded"] == 50, audit
    after = client.audit(sku, settle=0)
    assert after["gate"]["redis_lost"] and 5 <= after["orders"] <= 8, after
    assert after["gate"]["unknown_units"] == 50 - after["ordered_quantity"] and not after["consistent"], after
