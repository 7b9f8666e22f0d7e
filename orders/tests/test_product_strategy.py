"""A strategy per product: the reset names it, every purchase of the product takes
its path, whatever the deployment's default (``FLASHSALE_STRATEGY``) and whatever
this process sold the product under before. On the real MariaDB and Redis."""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache
from django.test import override_settings
from rest_framework.test import APIClient

from common.errors import Busy
from common.strategies import STRATEGIES
from common.testing import run_at_once
from inventory.models import Product
from orders import reset, resolve
from orders.gate.tally import gate_tally
from orders.models import Order
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.selectors import sale_audit
from orders.tests.test_gate import persist

pytestmark = pytest.mark.django_db


def buy(sku: str, user: str = "u1", key: str | None = None):
    return order_create(sku=sku, quantity=1, user_id=user, idempotency_key=key)


@pytest.mark.django_db(transaction=True)
@override_settings(FLASHSALE_STRATEGY="atomic", FLASHSALE_SECTION_DELAY_MS=20)
def test_two_products_in_one_process_each_take_their_own_path():
    sale_reset(sku="weak", stock=5, strategy="none")
    sale_reset(sku="strong", stock=5, strategy="atomic")
    # 16 buyers of each at once, interleaved: the same threads, the same moment.
    outcomes = run_at_once(lambda i: buy("weak" if i % 2 else "strong", user=f"u{i}"), 32)
    weak, strong = sale_audit(sku="weak"), sale_audit(sku="strong")
    # none: buyers that read a positive stock inside the same 20 ms window each wrote
    # back their own decrement (how many did is the machine's: the weak product's
    # refusals are not counted).
    assert weak.strategy == "none" and weak.lost_updates > 0 and not weak.consistent, weak
    assert strong.strategy == "atomic", strong
    assert (strong.orders, strong.oversold, strong.lost_updates, strong.consistent) == (5, 0, 0, True), strong
    refused = [type(o).__name__ for i, o in enumerate(outcomes) if i % 2 == 0 and o is not None]
    assert refused == ["SoldOut"] * 11  # the strong product's refusals, and nothing else
    assert set(Order.objects.filter(product__sku="weak").values_list("strategy", flat=True)) == {"none"}
    assert set(Order.objects.filter(product__sku="strong").values_list("strategy", flat=True)) == {"atomic"}


@override_settings(FLASHSALE_STRATEGY="setnx")
def test_a_product_without_its_own_strategy_follows_the_deployment():
    sale_reset(sku="p", stock=5)
    assert Product.objects.get(sku="p").strategy == ""
    assert buy("p").strategy == "setnx"
    with override_settings(FLASHSALE_STRATEGY="zookeeper"):  # the deployment switched
        assert buy("p", user="u2").strategy == "zookeeper"
        assert sale_audit(sku="p").strategy == "zookeeper"


@override_settings(FLASHSALE_STRATEGY="atomic")
def test_a_product_moves_between_the_sellers_with_its_resets():
    """Each reset changes the product's seller, and the next purchase goes to the new
    one: the reset answers after every process's memory of the old strategy ends."""
    sale_reset(sku="p", stock=5, strategy="gate")
    first = buy("p", key="k1")
    assert (first.strategy, first.status) == ("gate", "accepted")
    assert persist() == 1

    sale_reset(sku="p", stock=5, strategy="redisson")  # the gate's sale is closed
    second = buy("p", key="k2")
    assert (second.strategy, second.status, second.remaining) == ("redisson", "confirmed", 4)

    sale_reset(sku="p", stock=5, strategy="gate")
    third = buy("p", key="k3")
    assert (third.strategy, third.status, third.remaining) == ("gate", "accepted", 4)
    # No claim of k3 in the transaction seller's flags: a replay is the gate's answer.
    replay = buy("p", key="k3")
    assert (replay.replayed, replay.order_id, replay.strategy) == (True, third.order_id, "gate")
    assert cache.get("idem:k3") is None
    persist()
    audit = sale_audit(sku="p")
    assert (audit.strategy, audit.orders, audit.consistent) == ("gate", 1, True)


@pytest.mark.django_db(transaction=True)  # the MySQL locks commit as a purchase does
@pytest.mark.parametrize("strategy", list(STRATEGIES))
@override_settings(FLASHSALE_STRATEGY="atomic")
def test_every_strategy_sells_a_product_reset_under_it(strategy):
    """Whatever the deployment's default, segments where the strategy has them."""
    segmented = STRATEGIES[strategy].segmented
    sale_reset(sku="p", stock=4, strategy=strategy, segments=2 if segmented else None)
    bought = [buy("p", user=f"u{n}", key=f"k{n}") for n in range(3)]
    assert {b.strategy for b in bought} == {strategy}
    assert {b.status for b in bought} == {"confirmed" if segmented else "accepted"}
    if not segmented:
        assert persist() == 3
    audit = sale_audit(sku="p")
    assert (audit.strategy, audit.orders, audit.remaining, audit.consistent) == (strategy, 3, 1, True), audit
    assert len(audit.segments_remaining) == (2 if segmented else 1)


@override_settings(FLASHSALE_STRATEGY="atomic")
def test_without_the_sales_mark_the_products_row_names_the_strategy():
    sale_reset(sku="p", stock=5, strategy="mysql-for-update")
    cache.delete("sale:p:opened")  # Redis lost the mark (a restart, a flush)
    assert buy("p").strategy == "mysql-for-update"
    assert Order.objects.get().strategy == "mysql-for-update"


@override_settings(FLASHSALE_STRATEGY="atomic")
def test_an_unknown_strategy_is_400_naming_the_known_ones_and_nothing_is_written(admin_api):
    response = admin_api.post("/api/admin/products/p/reset", {"stock": 5, "strategy": "mutex"}, format="json")
    assert response.status_code == 400, response.content
    message = str(response.json())
    assert "mutex" in message and all(name in message for name in STRATEGIES)
    assert not Product.objects.filter(sku="p").exists()


@override_settings(FLASHSALE_STRATEGY="atomic")
def test_the_gate_keeps_one_segment_even_when_it_is_not_the_default(admin_api):
    response = admin_api.post("/api/admin/products/p/reset", {"stock": 5, "strategy": "gate", "segments": 4},
                              format="json")
    assert response.status_code == 400, response.content
    assert not Product.objects.filter(sku="p").exists()


@override_settings(FLASHSALE_STRATEGY="atomic")
def test_the_product_the_purchase_and_the_audit_name_the_strategy(admin_api):
    reset = admin_api.post("/api/admin/products/p/reset", {"stock": 5, "strategy": "zookeeper"},
                           format="json")
    assert reset.status_code == 200 and reset.json()["strategy"] == "zookeeper", reset.content
    public = APIClient()
    assert public.get("/api/products/p").json()["strategy"] == "zookeeper"
    bought = public.post("/api/orders", {"sku": "p", "quantity": 1, "user_id": "u1"}, format="json")
    assert bought.status_code == 201 and bought.json()["strategy"] == "zookeeper", bought.content
    assert admin_api.get("/api/products/p/audit").json()["strategy"] == "zookeeper"
    # A reset without one gives the product back to the deployment's default.
    again = admin_api.post("/api/admin/products/p/reset", {"stock": 5}, format="json")
    assert again.json()["strategy"] == "atomic"


@override_settings(FLASHSALE_STRATEGY="atomic")
def test_a_purchase_that_meets_a_sale_reset_to_the_gate_under_it_is_refused_and_writes_nothing():
    """A process that resolved the product's strategy before a reset to the gate (its
    memory, put here by hand) meets the gate's sale in the transaction seller: 503,
    no order, no claim of the key left; the next purchase resolves afresh."""
    sale_reset(sku="p", stock=5, strategy="gate")
    resolve._strategies.put("p", STRATEGIES["atomic"])
    with pytest.raises(Busy, match="reset under another strategy"):
        buy("p", key="k1")
    assert not Order.objects.exists() and cache.get("idem:k1") is None
    assert gate_tally(sku="p").redis_remaining == 5
    assert (buy("p", key="k1").strategy, persist()) == ("gate", 1)


@override_settings(FLASHSALE_STRATEGY="atomic")
def test_a_purchase_that_meets_a_sale_reset_from_the_gate_under_it_is_refused_and_writes_nothing():
    sale_reset(sku="p", stock=5, strategy="redisson")
    resolve._strategies.put("p", STRATEGIES["gate"])  # resolved before the reset
    with pytest.raises(Busy, match="reset under another strategy"):
        buy("p", key="k1")
    assert not Order.objects.exists() and gate_tally(sku="p") is None
    bought = buy("p", key="k1")
    assert (bought.strategy, bought.status, bought.remaining) == ("redisson", "confirmed", 4)


@pytest.mark.parametrize(("before", "after", "waits"), [("atomic", "gate", True), ("gate", "redisson", True),
                                                        ("atomic", "atomic", False)])
@override_settings(FLASHSALE_STRATEGY="atomic", FLASHSALE_STRATEGY_MEMORY_S=0.3)
def test_a_reset_that_changes_the_strategy_answers_after_every_memory_of_the_old_one(
        monkeypatch, before, after, waits):
    """The latest a process can read the old strategy is just before the reset writes
    the new one (here: a read made then); the reset waits until that memory ends.
    A reset that keeps the strategy waits for nothing."""
    sale_reset(sku="p", stock=5, strategy=before)
    write, seen = reset.sale_state_open, {}

    def read_just_before_the_write(**kwargs):
        resolve._strategies.pop("p")
        seen["strategy"] = resolve.strategy_resolve("p")[0].name
        seen["until"] = resolve._strategies.until("p")
        return write(**kwargs)

    def settle(until):
        seen["settled"], seen["now"] = until, time.monotonic()

    monkeypatch.setattr(reset, "sale_state_open", read_just_before_the_write)
    monkeypatch.setattr(reset, "gate_settle", settle)
    sale_reset(sku="p", stock=5, strategy=after)
    assert seen["strategy"] == before  # the old strategy, remembered
    if waits:
        assert seen["settled"] >= seen["until"] > seen["now"], seen
    else:
        assert seen["settled"] <= seen["now"], seen
