"""A sale with a payment window through nginx, two instances, the stack's expirer and
its stand-in provider: unpaid units come back on their own and sell again, under a
lock strategy and the conditional UPDATE; a paid order stays paid."""

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


def _settled(client, order_id: int, user: str, within: float = 15.0) -> str:
    """The order's payment status once it left pending (the provider's webhook)."""
    deadline = time.monotonic() + within
    while True:
        status = client.order_detail(order_id, user).json()["payment_status"]
        if status != "pending" or time.monotonic() > deadline:
            return status
        time.sleep(0.1)


def test_a_buyer_pays_through_the_provider_and_the_order_stays_paid(stack_apps):
    client, sku = stack_apps(), "paid-atomic"
    client.reset(sku, 2, strategy="atomic", payment_window_s=3)
    run = uuid.uuid4().hex[:8]
    placed = client.order(sku, 1, "payer", key=f"{run}-p")
    assert placed.status_code == 201, placed.json()
    order_id = placed.json()["order_id"]
    declined = client.pay(order_id, "payer", payment_method="pm_card_chargeDeclined")
    assert (declined.status_code, declined.json()["error"]) == (402, "payment_declined")
    answer = client.pay(order_id, "payer", key=f"{run}-pay")
    assert answer.status_code == 202, answer.json()
    assert _settled(client, order_id, "payer") == "paid"
    assert client.order(sku, 1, "idler", key=f"{run}-i").status_code == 201  # never pays
    audit = _returned(client, sku, 1)
    assert (audit["returned_quantity"], audit["ordered_quantity"], audit["remaining"]) == (1, 1, 1), audit
    assert client.order_detail(order_id, "payer").json()["payment_status"] == "paid"
    assert client.pay(order_id, "payer").json()["error"] == "not_payable"


def test_the_demos_payment_round_ends_with_every_unit_paid_once(stack_apps):
    from loadtest.demo import payment_summary, payment_window_round

    done = payment_window_round(stack_apps(), stock=4, window_s=1)
    assert done["sold_out_before"] == "sold_out"
    assert done["statuses"] == {"paid": 4, "expired": 2}
    audit = done["audit"]
    assert (audit["orders"], audit["returned_quantity"], audit["ordered_quantity"], audit["remaining"],
            audit["consistent"]) == (6, 2, 4, 0, True)
    assert "paid 4, expired 2" in payment_summary(done)
