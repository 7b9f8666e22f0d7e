"""The gate with replicas asked for (``FLASHSALE_GATE_REPLICAS``): a scratch primary and
its replica on loopback, started here and stopped by PID. The replica is held with
SIGSTOP to make the WAIT after a script time out, deterministically."""

import signal
from contextlib import contextmanager

import pytest
from django.test import override_settings

from common.errors import OutcomeUnknown, SoldOut, Unavailable
from common.testing import wait_until
from orders.gate.persister import Persister
from orders.gate.reconcile import gate_failed_over
from orders.gate.sell import GateFailover
from orders.gate.store import SALES, gate_keys, gate_redis
from orders.purchase import order_create
from orders.reset import sale_reset
from stack.scratch import redis_cluster, redis_servers, replica_in_step, start_redis

pytestmark = pytest.mark.django_db

SKU = "replicated-1"


def counted_in(primary) -> bool:
    """The replica online, and (with min-replicas-to-write) acknowledging in time."""
    replication = primary.client().info("replication")
    return (replication.get("slave0", {}).get("state") == "online"
            and replication.get("min_slaves_good_slaves", 1) >= 1)


@contextmanager
def primary_and_replica(*primary_args: str):
    with redis_servers(1, *primary_args) as (primary,):
        replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
        try:
            wait_until(lambda: counted_in(primary), 10, what="the primary to count its replica in sync")
            primary.client().set("probe", "1")
            wait_until(lambda: replica.client().get("probe") == b"1", 10, what="the replica in sync")
            yield primary, replica
        finally:
            replica.process.send_signal(signal.SIGCONT)
            replica.stop()


@contextmanager
def held(replica):
    """The replica frozen: it takes nothing from its primary and acknowledges nothing."""
    replica.process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        replica.process.send_signal(signal.SIGCONT)


def buy(key: str):
    return order_create(sku=SKU, quantity=1, user_id=f"buyer-{key}", idempotency_key=key)


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "alone"])
def test_an_answer_waits_for_the_replica_and_one_it_did_not_reach_is_never_201(pipeline):
    with primary_and_replica() as (primary, replica), override_settings(
            FLASHSALE_STRATEGY="gate", FLASHSALE_GATE_REDIS_URL=primary.url, FLASHSALE_GATE_PIPELINE=pipeline,
            FLASHSALE_GATE_REPLICAS=1, FLASHSALE_GATE_REPLICA_WAIT_MS=200):
        sale_reset(sku=SKU, stock=2)
        first = buy("k1")
        # Answered only once the replica held it: read there the moment it returns.
        assert replica.client().hget(gate_keys(SKU).keys, "k1") is not None
        with held(replica):
            with pytest.raises(OutcomeUnknown) as unknown:
                buy("k2")  # taken on the primary, not on the replica within 200 ms
            assert unknown.value.order_id is not None
            with pytest.raises(Unavailable):
                buy("k3")  # sold out on the primary, which the replica cannot confirm
            with pytest.raises(OutcomeUnknown):
                buy("k1")  # a replay waits too: its record is rewritten for the WAIT to cover
        # The replica back: each key learns the truth.
        second = buy("k2")
        assert second.replayed and second.order_id == unknown.value.order_id
        assert buy("k1").order_id == first.order_id
        with pytest.raises(SoldOut):
            buy("k3")
        assert replica.client().hget(gate_keys(SKU).sale, "stock") == b"0"


def test_a_primary_without_a_replica_in_sync_refuses_the_purchase_and_takes_nothing():
    with primary_and_replica("--min-replicas-to-write", "1", "--min-replicas-max-lag", "1") as (
            primary, replica), override_settings(
            FLASHSALE_STRATEGY="gate", FLASHSALE_GATE_REDIS_URL=primary.url, FLASHSALE_GATE_REPLICAS=1):
        sale_reset(sku=SKU, stock=5)
        with held(replica):
            # Past the lag allowed, the primary counts no replica in sync.
            wait_until(lambda: primary.client().info("replication")["min_slaves_good_slaves"] == 0, 10,
                       what="the primary to count its replica out")
            with pytest.raises(Unavailable, match="too few replicas"):
                buy("k1")
            assert primary.client().hget(gate_keys(SKU).sale, "stock") == b"5"
            assert primary.client().xlen(gate_keys(SKU).stream) == 0
        wait_until(lambda: counted_in(primary), 10, what="the replica counted in again")
        assert buy("k1").remaining == 4


def test_on_a_redis_cluster_the_wait_follows_the_script_to_the_products_node():
    with redis_cluster(3, replicas=1) as nodes, override_settings(
            FLASHSALE_STRATEGY="gate", FLASHSALE_GATE_REDIS_URL=nodes[0].url,
            FLASHSALE_GATE_REDIS_CLUSTER=True, FLASHSALE_GATE_REPLICAS=1, FLASHSALE_GATE_REPLICA_WAIT_MS=200):
        sale_reset(sku=SKU, stock=2)
        port = gate_redis().get_node_from_key(gate_keys(SKU).sale).port
        primary = next(node for node in nodes if node.port == port)
        replica = next(node for node in nodes if node.client().info("replication").get("master_port") == port)
        # Caught up with the reset's writes (stack.scratch.replica_in_step says why).
        wait_until(lambda: replica_in_step(primary.client()), 10,
                   what="the product's replica to hold the sale")
        first = buy("k1")
        reader = replica.client(single_connection_client=True)
        reader.execute_command("READONLY")  # a replica of a cluster answers reads only when asked so
        assert reader.hget(gate_keys(SKU).keys, "k1") is not None
        with held(replica), pytest.raises(OutcomeUnknown):
            buy("k2")
        assert buy("k2").replayed and buy("k1").order_id == first.order_id

        # The shard fails over: its replica takes over (TAKEOVER: without the handshake or
        # the votes, which a cluster made a moment ago may not give); the old primary follows.
        replica.client().execute_command("CLUSTER", "FAILOVER", "TAKEOVER")
        wait_until(lambda: replica_in_step(replica.client()), 10,
                   what="the replica promoted, the old primary following")
        with pytest.raises(Unavailable):
            buy("k3")  # asked where the product was: moved, nothing ran; the client learns the layout
        with pytest.raises(GateFailover):
            buy("k3")  # the new primary holds the sale: paused until it is reconciled
        persister = Persister("p1", block_ms=10)
        wait_until(lambda: persister.step() == 0 and not gate_failed_over([SKU]), 10,
                   what="the stream written and the sale reconciled")
        # Every order answered before is on the new primary, and the sale goes on there.
        assert buy("k1").order_id == first.order_id and buy("k2").replayed
        with pytest.raises(SoldOut):
            buy("k3")
        gate_redis().delete(SALES)
