"""The gate on a Redis Cluster: three masters on loopback, started here with
``redis-server --cluster-enabled yes`` and ``redis-cli --cluster create``, stopped by
PID. Every key of one product shares its hash tag, so each product's script runs on
one node; the products are chosen so that every node holds some."""

import itertools
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from common.errors import SoldOut
from common.testing import run_at_once
from orders.gate.persister import Persister
from orders.gate.returns import Owed, gate_retake
from orders.gate.store import SALES, gate_keys, gate_redis
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.selectors import sale_audit
from payments.expiry import orders_expire
from stack.scratch import redis_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def cluster():
    with redis_cluster(3) as nodes:
        yield nodes


@pytest.fixture
def on_the_cluster(cluster):
    with override_settings(FLASHSALE_STRATEGY="gate", FLASHSALE_GATE_REDIS_URL=cluster[0].url,
                           FLASHSALE_GATE_REDIS_CLUSTER=True):
        yield gate_redis()
        gate_redis().delete(SALES)


def skus_on_every_node(client, nodes: int) -> list[str]:
    """The first skus whose keys, together, land on every node: two per node."""
    chosen, per_node = [], {}
    for i in itertools.count():
        sku = f"cluster-{i}"
        keys = gate_keys(sku)
        assert len({client.keyslot(key) for key in keys}) == 1  # one slot per product
        node = client.get_node_from_key(keys.sale).name
        if per_node.get(node, 0) < 2:
            per_node[node] = per_node.get(node, 0) + 1
            chosen.append(sku)
        if len(per_node) == nodes and all(n == 2 for n in per_node.values()):
            return chosen


def test_the_gate_sells_on_a_redis_cluster_with_products_spread_over_its_nodes(on_the_cluster, cluster):
    skus = skus_on_every_node(on_the_cluster, len(cluster))
    for sku in skus:
        sale_reset(sku=sku, stock=5)

    def buy(i: int):
        sku = skus[i % len(skus)]
        return order_create(sku=sku, quantity=1, user_id=f"u{i}", idempotency_key=f"{sku}-k{i}")

    errors = run_at_once(buy, 7 * len(skus))  # 7 buyers per product for 5 units
    assert sum(e is None for e in errors) == 5 * len(skus)
    assert all(isinstance(e, SoldOut) for e in errors if e is not None)
    again = buy(errors.index(None))  # a replay, answered by the node that holds its product
    assert again.replayed

    persister = Persister("cluster", block_ms=1, claim_idle_ms=0)
    while persister.step():
        pass
    for sku in skus:
        audit = sale_audit(sku=sku)
        assert (audit.orders, audit.remaining, audit.gate.reconciled) == (5, 0, True), sku
        assert audit.consistent, sku


@pytest.mark.django_db(transaction=True)
def test_units_of_expired_orders_go_back_to_the_sale_on_its_node(on_the_cluster, cluster):
    # A sale with a payment window: unpaid orders expire, their units go back to the
    # sale's Redis on the node that holds it, and a late payment takes one again.
    skus = skus_on_every_node(on_the_cluster, len(cluster))[::2]  # one a node
    for sku in skus:
        sale_reset(sku=sku, stock=2, payment_window_s=60)
    placed = {sku: [order_create(sku=sku, quantity=1, user_id=f"{sku}-u{i}",
                                 idempotency_key=f"{sku}-k{i}").order_id for i in range(2)] for sku in skus}
    persister = Persister("cluster", block_ms=1, claim_idle_ms=0)
    while persister.step():
        pass
    due = timezone.now() + timedelta(seconds=60 + settings.FLASHSALE_PAYMENT_GRACE_S + 1)
    while orders_expire(now=due).orders:
        pass
    for sku in skus:
        assert on_the_cluster.hget(gate_keys(sku).sale, "stock") == "2", sku
        first = placed[sku][0]
        assert gate_retake(sku=sku, order=Owed(first, 1, f"{sku}-u0"))[:2] == ("retaken", 1)
