"""Sale rules: the per-user limit (in the database, under every strategy) and the
purchase throttles (per buyer, per address, on the shared Redis)."""

import pytest
from django.conf import settings
from django.test import override_settings
from rest_framework.test import APIClient

from common.errors import LimitReached, SoldOut
from common.testing import in_thread, run_at_once
from inventory.faults import stalled
from inventory.models import Stock
from orders.models import BuyerQuota, Order
from orders.purchase import order_create
from orders.reset import sale_reset
from stack.scratch import free_port


def post(user: str, key: str | None = None, quantity: int = 1, **headers):
    if key:
        headers["HTTP_IDEMPOTENCY_KEY"] = key
    return APIClient().post("/api/orders", {"sku": "sku-1", "quantity": quantity, "user_id": user},
                            format="json", **headers)


@pytest.mark.django_db
@override_settings(FLASHSALE_PER_USER_LIMIT=2)
def test_past_the_per_user_limit_a_buyer_gets_409_limit_reached_and_nothing_is_written(product_factory):
    product_factory(sku="sku-1", stock=10)
    assert post("u1", "k1").status_code == 201 and post("u1", "k2").status_code == 201
    response = post("u1", "k3")
    assert response.status_code == 409
    assert response.json() | {"message": ""} == {"error": "limit_reached", "message": "", "sku": "sku-1",
                                                 "limit": 2}
    assert post("u2", "k4", quantity=2).status_code == 201  # another buyer has room of their own
    assert Order.objects.filter(user_id="u1").count() == 2 and Stock.objects.get().quantity == 6
    assert post("u1", "k1").status_code == 200  # a replay is still its order


@pytest.mark.django_db(transaction=True)
@override_settings(FLASHSALE_PER_USER_LIMIT=1)
def test_a_purchase_that_fails_gives_its_units_back(product_factory):
    product_factory(sku="sku-1", stock=1)

    def the_stock_runs_out(point):
        if point == "start":  # u1's units are counted, the stock not yet touched
            in_thread(lambda: Stock.objects.update(quantity=0))

    with stalled(the_stock_runs_out), pytest.raises(SoldOut):
        order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k1")
    assert BuyerQuota.objects.get(user_id="u1").bought == 0  # rolled back with the purchase


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("strategy", ["none", "atomic", "redisson", "mysql"])
def test_the_limit_holds_when_one_buyer_sends_many_at_once_under_any_strategy(product_factory, strategy):
    product_factory(sku="sku-1", stock=100)
    with override_settings(FLASHSALE_PER_USER_LIMIT=2, FLASHSALE_STRATEGY=strategy):
        errors = run_at_once(lambda i: order_create(sku="sku-1", quantity=1, user_id="u1",
                                                    idempotency_key=f"k{i}"), 8)
    assert Order.objects.filter(user_id="u1").count() == 2
    assert sum(isinstance(e, LimitReached) for e in errors) == 6, errors


@pytest.mark.django_db
def test_a_sale_reset_gives_every_buyer_their_limit_back(product_factory):
    with override_settings(FLASHSALE_PER_USER_LIMIT=1):
        sale_reset(sku="sku-1", stock=5)
        order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k1")
        sale_reset(sku="sku-1", stock=5)
        assert not order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k2").replayed


@pytest.mark.django_db
@override_settings(FLASHSALE_THROTTLE_USER="2/m")
def test_a_buyer_past_their_rate_gets_429_with_retry_after(product_factory):
    product_factory(sku="sku-1", stock=10)
    assert [post("u1").status_code for _ in range(2)] == [201, 201]
    response = post("u1")
    assert response.status_code == 429
    assert response.json()["error"] == "throttled" and response.json()["message"]
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    assert post("u2").status_code == 201  # counted per buyer
    assert Order.objects.count() == 3


@pytest.mark.django_db
@override_settings(FLASHSALE_THROTTLE_ADDRESS="3/m")
def test_an_address_past_its_rate_gets_429_whatever_it_forwards(product_factory):
    product_factory(sku="sku-1", stock=10)
    # Behind nginx: the address nginx appends is counted, not the one the client wrote.
    forged = [post(f"u{i}", HTTP_X_FORWARDED_FOR=f"10.0.0.{i}, 192.0.2.7").status_code for i in range(4)]
    assert forged == [201, 201, 201, 429]
    assert post("u9", HTTP_X_FORWARDED_FOR="192.0.2.8").status_code == 201  # another client


@pytest.mark.django_db
def test_throttles_let_purchases_through_when_redis_cannot_be_reached(product_factory):
    product_factory(sku="sku-1", stock=10)
    nowhere = {"default": {**settings.CACHES["default"], "LOCATION": f"redis://127.0.0.1:{free_port()}/0"}}
    with override_settings(CACHES=nowhere, FLASHSALE_THROTTLE_USER="1/m", FLASHSALE_THROTTLE_ADDRESS="1/m"):
        assert [post("u1").status_code for _ in range(3)] == [201, 201, 201]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("strategy", ["atomic", "redisson", "gate"])
def test_buyers_differing_in_case_are_two_buyers_to_the_limit_in_both_stores(product_factory, strategy):
    """The limit lives in MariaDB (the locked transaction) or in Redis (the gate):
    both compare the buyer byte for byte, so each spelling has a limit of its own."""
    with override_settings(FLASHSALE_PER_USER_LIMIT=1, FLASHSALE_STRATEGY=strategy):
        sale_reset(sku="sku-1", stock=10)
        for user in ("Alice", "alice", "Alice "):
            order_create(sku="sku-1", quantity=1, user_id=user, idempotency_key=f"k-{user}")
        with pytest.raises(LimitReached):
            order_create(sku="sku-1", quantity=1, user_id="alice", idempotency_key="k-again")
    if strategy != "gate":
        assert sorted(BuyerQuota.objects.values_list("user_id", "bought")) == [
            ("Alice", 1), ("Alice ", 1), ("alice", 1)]
