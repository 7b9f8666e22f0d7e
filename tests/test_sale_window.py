"""The sale window through nginx and two instances: refused before the start with
Retry-After, sold from the second it opens, for every shape of purchase (a locking
strategy and the gate)."""

import time
import uuid
from datetime import UTC, datetime

import pytest

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("strategy", ["redisson", "gate"])
def test_a_sale_opens_on_its_second_through_nginx(stack_apps, strategy):
    client, sku = stack_apps(), f"window-{strategy}"  # the product under its own strategy
    key = uuid.uuid4().hex  # idempotency keys outlive a reset of another product
    product = client.reset(sku, 5, strategy=strategy, starts_in=2)
    opens = datetime.fromisoformat(product["starts_at"])
    early = client.order(sku, 1, "u1", key=key)
    assert early.status_code == 409 and early.json()["error"] == "not_started"
    assert datetime.fromisoformat(early.json()["starts_at"]) == opens
    assert early.headers["Retry-After"] in {"1", "2"}
    time.sleep(max((opens - datetime.now(UTC)).total_seconds(), 0) + 0.05)
    assert client.order(sku, 1, "u1", key=key).status_code == 201  # the same key, unspent
    audit = client.audit(sku)
    assert (audit["orders"], audit["remaining"], audit["consistent"]) == (1, 4, True)
    assert audit["starts_at"] == product["starts_at"]
