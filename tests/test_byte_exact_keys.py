"""Keys are byte-exact in MariaDB as in Redis, on the running stack through nginx.

MariaDB's default collation folds case and ignores trailing spaces; Redis compares
bytes. Where the two disagreed, the gate answered 201 to a key that the database then
refused as a duplicate (a 201 that never became an order), and a sku typed in another
case found the product in MariaDB but none of its sale's keys in Redis.
"""

from __future__ import annotations

import uuid

import pytest
import redis

from common.strategies import STRATEGIES
from stack.servers import mariadb_app_connection

pytestmark = pytest.mark.e2e

CORRECT = [name for name, spec in STRATEGIES.items() if spec.claims_correct]


@pytest.mark.parametrize("strategy", CORRECT)
def test_keys_differing_in_case_or_a_trailing_space_are_separate_orders(stack_config, stack_apps, strategy):
    client = stack_apps()
    sku = f"case-{strategy}-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 10, strategy=strategy)
    key = f"Key-{uuid.uuid4().hex[:8]}"
    # HTTP trims a header's trailing spaces: the key cannot carry one, the buyer can.
    variants = [(key, "Alice"), (key.lower(), "alice"), (key.upper(), "Alice "), (key.swapcase(), "ALICE")]
    answers = [client.order(sku, 1, user, key=k) for k, user in variants]
    assert [a.status_code for a in answers] == [201] * 4, [a.text for a in answers]
    order_ids = [a.json()["order_id"] for a in answers]
    assert len(set(order_ids)) == 4

    replay = client.order(sku, 1, "Alice", key=key)
    assert (replay.status_code, replay.json()["order_id"]) == (200, order_ids[0]), replay.text

    audit = client.audit(sku, settle=60)
    assert (audit["orders"], audit["remaining"], audit["consistent"]) == (4, 6, True), audit
    for order_id, (_, user) in zip(order_ids, variants, strict=True):
        detail = client.order_detail(order_id, user).json()
        assert detail["status"] == "confirmed", detail
    with mariadb_app_connection(stack_config) as db:
        cursor = db.cursor()
        cursor.execute("SELECT o.user_id, o.idempotency_key FROM orders_order o JOIN inventory_product p"
                       " ON p.id = o.product_id WHERE p.sku = %s ORDER BY o.id", [sku])
        rows = cursor.fetchall()
    if client.tokens is None:  # the buyer is the body's, byte for byte
        assert sorted(rows) == sorted((user, k) for k, user in variants)
    else:  # four buyers, each an account (differing in case, two could not be), each key its buyer's
        assert len({user for user, _ in rows}) == 4
        assert all(key.startswith(f"{user}/") for user, key in rows), rows
        assert sorted(k.split("/", 1)[1] for _, k in rows) == sorted(k for k, _ in variants)


@pytest.mark.parametrize("strategy", ["atomic", "gate"])
def test_a_sku_in_another_case_is_not_found_and_leaves_no_key_in_redis(stack_config, stack_apps, strategy):
    client = stack_apps()
    sku = f"sku-{strategy}-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 5, strategy=strategy)
    other = sku.upper()
    answer = client.order(other, 1, "u1")
    assert answer.status_code == 404, answer.text
    assert answer.json()["error"] == "not_found"
    assert client.session.get(client._url(f"/api/products/{other}"), timeout=10).status_code == 404
    # Nothing of the other spelling was written: no sold-out mark, no gate key.
    store = redis.Redis(port=stack_config.redis_port)
    assert not list(store.scan_iter(match=f"*{other}*", count=1000))
    assert client.order(sku, 1, "u1").status_code == 201
