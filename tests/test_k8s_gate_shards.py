"""The production gate's Redis Cluster with one shard down, on a real cluster started
here with the manifests' own ``cluster-require-full-coverage``: the products of the
shard that went answer 503 (unavailable), the others sell on, as the Kubernetes page
promises. With Redis's default (``yes``) every product stops."""

from __future__ import annotations

import time

import pytest
from django.test import override_settings

from common.errors import Unavailable
from orders.gate.store import gate_keys, gate_redis
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.tests.test_gate_cluster import skus_on_every_node
from stack.scratch import ScratchRedis, redis_cluster

from .test_k8s import K8S, container_of, render

pytestmark = pytest.mark.django_db(transaction=True)


def manifests_coverage() -> str:
    node = container_of(render(K8S / "overlays" / "production"), "StatefulSet", "redis-gate", "redis")
    args = node["args"]
    return args[args.index("--cluster-require-full-coverage") + 1]


def _failed_seen(survivor: ScratchRedis, port: int) -> bool:
    """Whether ``survivor`` holds the node on ``port`` failed (the cluster agreed, not
    only suspected)."""
    node = survivor.client().cluster("nodes").get(f"127.0.0.1:{port}", {})
    return "fail" in node.get("flags", "").split(",")


@pytest.mark.parametrize("coverage", ["manifests", "yes"], ids=["the-manifests", "redis-default"])
def test_one_gate_shard_down_refuses_its_own_products_alone(coverage):
    value = manifests_coverage() if coverage == "manifests" else coverage
    with redis_cluster(3, options=("--cluster-require-full-coverage", value)) as nodes:
        gate = {"FLASHSALE_STRATEGY": "gate", "FLASHSALE_GATE_REDIS_URL": nodes[0].url,
                "FLASHSALE_GATE_REDIS_CLUSTER": True}
        with override_settings(**gate):
            client = gate_redis()
            skus = skus_on_every_node(client, len(nodes))
            for sku in skus:
                sale_reset(sku=sku, stock=5)
            on = {sku: client.get_node_from_key(gate_keys(sku).sale).port for sku in skus}
            down = next(n for n in nodes if n.port == on[skus[0]])
            lost = {sku for sku in skus if on[sku] == down.port}
            survivor = next(n for n in nodes if n is not down)
            down.crash()
            deadline = time.monotonic() + 60
            while not _failed_seen(survivor, down.port):
                assert time.monotonic() < deadline, "the cluster never agreed the node had failed"
                time.sleep(0.2)
            while value == "yes" and survivor.client().cluster("info")["cluster_state"] != "fail":
                assert time.monotonic() < deadline, "the cluster never stopped"  # a slot has no primary
                time.sleep(0.2)
            refused = set()
            for i, sku in enumerate(skus):
                try:
                    order_create(sku=sku, quantity=1, user_id=f"u{i}", idempotency_key=f"shard-{sku}")
                except Unavailable:
                    refused.add(sku)
    assert len(lost) == 2 and len(skus) == 6
    # The manifests' cluster keeps its promise whatever they set; Redis's default stops all.
    assert refused == (lost if coverage == "manifests" else set(skus)), (value, refused, lost)
