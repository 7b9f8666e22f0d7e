"""A sale with a payment window through nginx, two instances and the stack's expirer:
unpaid units come back on their own and sell again, under a lock strategy and the
conditional UPDATE."""

import time
import uuid

import pytest

pytestmark = pytest.mark.e2e


def _returned(client, sku: str, units: int, within: float = 20.0) -> dict:
    """The audit once the expirer has given ``units`` back (it passes every second)."""
    deadline = time.monotonic() + within
    while True:
        audit = client.audit(sku)
        if audit["returned_quantity"] >= units or time.monotonic() > deadline:
            return audit
        time.sleep(0.25)


@pytest.mark.parametrize("strategy", ["redisson", "atomic"])
def test_unpaid_units_come_back_and_sell_again(stack_apps, strategy):
    client, sku = stack_apps(), f"unpaid-{strategy}"
    product = client.reset(sku, 3, strategy=strategy, segments=1, payment_window_s=1)
    assert product["payment_window_s"] == 1
    run = uuid.uuid4().hex[:8]  # idempotency keys outlive a reset
    for i in range(3):
        assert client.order(sku, 1, f"u{i}", key=f"{run}-{i}").status_code == 201
    assert client.order(sku, 1, "u9", key=f"{run}-9").json()["error"] == "sold_out"
    audit = _returned(client, sku, 3)
    assert (audit["returned_quantity"], audit["remaining"], audit["ordered_quantity"]) == (3, 3, 0), audit
    # The sold-out mark from before the returns says nothing: the units sell again.
    for i in range(3):
        assert client.order(sku, 1, f"v{i}", key=f"{run}-v{i}").status_code == 201
    assert client.order(sku, 1, "v9", key=f"{run}-v9").json()["error"] == "sold_out"
    audit = client.audit(sku)  # the second buyers' orders may have expired too by now
    assert (audit["orders"], audit["oversold"], audit["consistent"]) == (6, 0, True), audit
    assert audit["remaining"] + audit["ordered_quantity"] == 3
