"""A sale with a waiting room sells only to admitted buyers, under every seller: the
locked transaction (its state in Redis, or its row when the state is lost) and the
gate (its script). Refused purchases write nothing."""

import time

import pytest
from django.core.cache import cache
from django.test import override_settings

from common.errors import AdmissionRefused, Busy, SoldOut
from common.gateredis import gate_redis
from common.strategies import STRATEGIES as STRATEGY_SPECS
from common.testing import held_elsewhere
from inventory.models import Stock
from locking import get_lock
from orders.gate.store import gate_keys
from orders.models import Order
from orders.purchase import order_create
from orders.reset import sale_reset
from waitingroom.services import RoomTerms, place_ask
from waitingroom.store import room_keys

pytestmark = pytest.mark.django_db

STRATEGIES = [name for name, spec in STRATEGY_SPECS.items() if spec.claims_correct]


def admitted(sku: str, buyer: str) -> str:
    place_ask(sku=sku, buyer=buyer)
    time.sleep(0.005)  # past Redis's millisecond: credit to admit with
    place = place_ask(sku=sku, buyer=buyer)
    assert place.state == "admitted" and place.admission is not None, place
    return place.admission


def units_left(sku: str) -> int:
    """The sale's units left: the gate's in Redis, the others' in the database."""
    gate = gate_redis().hget(gate_keys(sku).sale, "stock")
    if gate is not None:
        return int(gate)
    return sum(Stock.objects.filter(product__sku=sku).values_list("quantity", flat=True))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_only_an_admitted_buyer_buys_and_only_once(strategy):
    sku = f"room-{strategy}"
    sale_reset(sku=sku, stock=5, strategy=strategy, room=RoomTerms(rate=1000, active=5, admission_s=60))
    with pytest.raises(AdmissionRefused) as refused:
        order_create(sku=sku, quantity=1, user_id="ann", idempotency_key="k-0")
    assert refused.value.extra["reason"] == "missing"
    token = admitted(sku, "ann")
    with pytest.raises(AdmissionRefused):  # hers, not bob's
        order_create(sku=sku, quantity=1, user_id="bob", idempotency_key="k-b", admission=token)
    bought = order_create(sku=sku, quantity=1, user_id="ann", idempotency_key="k-1", admission=token)
    again = order_create(sku=sku, quantity=1, user_id="ann", idempotency_key="k-1", admission=token)
    assert again.replayed and again.order_id == bought.order_id
    with pytest.raises(AdmissionRefused) as refused:  # a second purchase with it
        order_create(sku=sku, quantity=1, user_id="ann", idempotency_key="k-2", admission=token)
    assert refused.value.extra["reason"] == "used"
    assert units_left(sku) == 4
    if strategy != "gate":  # the gate's orders reach the database after the answer
        assert Order.objects.filter(product__sku=sku).count() == 1
    sale_reset(sku=sku, stock=5, strategy=strategy, room=RoomTerms(rate=1000, active=5, admission_s=60))
    with pytest.raises(AdmissionRefused) as refused:  # the sale is new: her admission was the last one's
        order_create(sku=sku, quantity=1, user_id="ann", idempotency_key="k-3", admission=token)
    assert refused.value.extra["reason"] == "stale"


@pytest.mark.parametrize("strategy", ["atomic", "setnx"])
def test_an_unkeyed_purchase_spends_its_admission_under_the_key_its_order_has(strategy):
    """The key made for a purchase sent without one is made once, at the door: the
    admission is spent under the key the order is written with."""
    sku = f"room-unkeyed-{strategy}"
    sale_reset(sku=sku, stock=5, strategy=strategy, room=RoomTerms(rate=1000, active=5, admission_s=60))
    bought = order_create(sku=sku, quantity=1, user_id="ann", admission=admitted(sku, "ann"))
    key = Order.objects.get(pk=bought.order_id).idempotency_key
    assert key.startswith("auto-")
    assert gate_redis().hget(room_keys(sku)["used"], "ann") == key


@pytest.mark.parametrize("strategy", ["atomic", "setnx"])
def test_the_room_holds_when_the_sale_state_is_lost(strategy):
    sku = f"room-lost-{strategy}"
    sale_reset(sku=sku, stock=5, strategy=strategy, room=RoomTerms(rate=1000, active=5, admission_s=60))
    cache.delete(f"sale:{sku}:opened")  # the state lost: the product's row says
    with pytest.raises(AdmissionRefused):
        order_create(sku=sku, quantity=1, user_id="ann", idempotency_key="k-0")
    assert units_left(sku) == 5
    order_create(sku=sku, quantity=1, user_id="ann", idempotency_key="k-1", admission=admitted(sku, "ann"))
    assert units_left(sku) == 4


@pytest.mark.parametrize("strategy", ["atomic", "gate"])
def test_a_sale_without_a_room_takes_no_admission(strategy):
    sku = f"no-room-{strategy}"
    sale_reset(sku=sku, stock=5, strategy=strategy, room=RoomTerms(rate=1000, active=5, admission_s=60))
    token = admitted(sku, "ann")
    sale_reset(sku=sku, stock=5, strategy=strategy)  # reset without one
    assert order_create(sku=sku, quantity=1, user_id="bob", idempotency_key="k-1").order_id
    # A token of the old sale's room buys nothing more than no token.
    assert order_create(sku=sku, quantity=1, user_id="ann", idempotency_key="k-2", admission=token).order_id


@pytest.mark.parametrize("strategy", ["atomic", "gate"])
def test_an_admission_run_out_buys_nothing(strategy):
    """Its token is still within its leeway: Redis's clock refuses it (the gate's own
    script, or use.lua)."""
    sku = f"room-late-{strategy}"
    sale_reset(sku=sku, stock=5, strategy=strategy, room=RoomTerms(rate=1000, active=5, admission_s=1))
    token = admitted(sku, "ann")
    time.sleep(1.05)
    with pytest.raises(AdmissionRefused) as refused:
        order_create(sku=sku, quantity=1, user_id="ann", idempotency_key="k-1", admission=token)
    assert refused.value.extra["reason"] == "expired"
    assert units_left(sku) == 5 and not Order.objects.filter(product__sku=sku).exists()


def test_an_admission_meeting_a_sold_out_gate_sale_is_spent_and_frees_its_slot():
    """After the script's first sold-out answer the process remembers the sale sold
    out; a purchase with an admission still goes to the script, which spends it."""
    sku = "room-sold-out"
    sale_reset(sku=sku, stock=1, strategy="gate", room=RoomTerms(rate=1000, active=1, admission_s=60))
    def buy(buyer: str):
        return order_create(sku=sku, quantity=1, user_id=buyer, idempotency_key=f"k-{buyer}",
                            admission=admitted(sku, buyer))

    buy("ann")
    with pytest.raises(SoldOut):
        buy("bob")
    with pytest.raises(SoldOut):  # remembered sold out now
        buy("cat")
    assert place_ask(sku=sku, buyer="cat").state == "used"
    admitted(sku, "dan")  # to cat's slot, freed (one at once)


@override_settings(FLASHSALE_STRATEGY="local",
                   LOCKING={"local": {"BACKEND": "locking.backends.local.LocalLockBackend",
                                      "OPTIONS": {"wait_timeout": 0.1}}})
def test_a_purchase_that_wrote_nothing_and_said_so_does_not_spend_its_admission():
    """An admission is spent with the sale's decision: a 503 (the stock lock busy) is
    none, and an unkeyed purchase cannot be retried under its key."""
    sku = "room-busy"
    sale_reset(sku=sku, stock=5, room=RoomTerms(rate=1000, active=5, admission_s=60))
    token = admitted(sku, "ann")
    with held_elsewhere(lambda: get_lock(f"stock:{sku}", alias="local")), pytest.raises(Busy):
        order_create(sku=sku, quantity=1, user_id="ann", admission=token)
    assert units_left(sku) == 5
    assert order_create(sku=sku, quantity=1, user_id="ann", admission=token).order_id
    with pytest.raises(AdmissionRefused) as refused:  # spent on the purchase that bought
        order_create(sku=sku, quantity=1, user_id="ann", admission=token)
    assert refused.value.extra["reason"] == "used" and units_left(sku) == 4
