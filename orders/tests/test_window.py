"""The sale window: before ``starts_at`` a purchase is 409 ``not_started`` with
Retry-After, from ``ends_at`` on 409 ``ended``; nothing is written, no lock is taken
and no query is made, under every strategy and the gate (whose script checks the
window on Redis' clock). On the real MariaDB, Redis and ZooKeeper."""

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from common.errors import Ended, NotStarted
from common.strategies import STRATEGIES
from inventory.models import Stock, StockFlow
from orders.gate.store import gate_redis
from orders.models import Order
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.selectors import sale_audit

pytestmark = pytest.mark.django_db(transaction=True)


def in_seconds(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def buy(key: str = "k1", user: str = "u1"):
    return order_create(sku="sku-1", quantity=1, user_id=user, idempotency_key=key)


def nothing_written(stock: int) -> bool:
    return (Order.objects.count(), StockFlow.objects.count(),
            sum(Stock.objects.values_list("quantity", flat=True))) == (0, 0, stock)


@pytest.fixture(params=list(STRATEGIES))
def strategy(request):
    with override_settings(FLASHSALE_STRATEGY=request.param):
        if request.param == "gate":
            gate_redis().flushdb()
        yield request.param


def test_before_the_start_a_purchase_is_refused_with_no_query_no_lock_and_no_write(strategy):
    began = time.monotonic()
    sale_reset(sku="sku-1", stock=5, starts_at=in_seconds(30))
    with CaptureQueriesContext(connection) as queries, pytest.raises(NotStarted) as caught:
        buy()
    asked_after = time.monotonic() - began
    assert len(queries) == 0, [q["sql"] for q in queries]
    # The seconds to the start, less what the test took to ask, however slow the machine.
    assert 29 - asked_after <= int(caught.value.headers["Retry-After"]) <= 31
    assert caught.value.extra["starts_at"].endswith("Z")
    assert nothing_written(5)
    # The key was not used up: it buys once the sale is open.
    sale_reset(sku="sku-1", stock=5, starts_at=in_seconds(-1))
    assert not buy().replayed


def _bought_in_the_window(span: float):
    """A sale whose window opens ``span`` seconds from now for ``span`` seconds: a
    purchase before it refused, one inside it placed. None when this machine was too
    slow for the span (a purchase that should have been before the opening, or inside
    the window, still ran when it had passed): the caller widens it. The assertions
    hold whenever the timing did."""
    starts = time.time() + span
    sale_reset(sku="sku-1", stock=5, starts_at=datetime.fromtimestamp(starts, UTC),
               ends_at=datetime.fromtimestamp(starts + span, UTC))
    try:
        early = buy("k1")
    except NotStarted:
        pass
    except Ended:
        if time.time() >= starts + span:
            return None  # it ran past the whole window
        raise
    else:
        assert time.time() >= starts, f"placed before the opening: {early}"
        return None  # it ran past the opening
    time.sleep(max(starts - time.time(), 0) + span / 4)
    try:
        first = buy("k1")
    except Ended:
        if time.time() >= starts + span:
            return None  # it ran past the end
        raise
    return starts + span, first


def test_the_sale_opens_on_its_second_and_closes_on_its_end(strategy):
    # The window as wide as this machine needs: four times what a reset and a
    # purchase took here just now (at least 0.4 s), before it and within it; twice as
    # wide again when a purchase in it ran past an edge (a machine slower meanwhile).
    started = time.monotonic()
    sale_reset(sku="sku-1", stock=5)
    buy("k0", user="u0")
    span = max(0.4, 4 * (time.monotonic() - started))
    for _ in range(6):
        if bought := _bought_in_the_window(span):
            break
        span *= 2
    else:
        pytest.fail(f"no purchase ran inside a window of up to {span / 2:.1f} s")
    ends, first = bought
    assert not first.replayed
    time.sleep(max(ends - time.time(), 0) + 0.05)
    with CaptureQueriesContext(connection) as queries, pytest.raises(Ended) as caught:
        buy("k2", user="u2")
    assert len(queries) == 0 and caught.value.extra["ends_at"].endswith("Z")
    # A replay of an order placed in the window is answered after the end.
    again = buy("k1")
    assert again.replayed and again.order_id == first.order_id


@override_settings(FLASHSALE_STRATEGY="atomic")
def test_without_the_sale_mark_the_window_comes_from_the_row_read_anyway():
    sale_reset(sku="sku-1", stock=5, starts_at=in_seconds(30))
    cache.clear()  # Redis lost the mark (a restart without persistence)
    with CaptureQueriesContext(connection) as queries, pytest.raises(NotStarted):
        buy()
    # The stock rows with their product, as any purchase reads them, and the refused
    # key's look-up that any refusal makes while no mark vouches for the flags: the
    # window adds no query of its own.
    stock_read, key_lookup = (q["sql"] for q in queries)
    assert "inventory_stock" in stock_read and "inventory_product" in stock_read
    assert "orders_order" in key_lookup and "idempotency_key" in key_lookup
    assert nothing_written(5)


@override_settings(FLASHSALE_STRATEGY="atomic")
def test_the_product_and_the_audit_show_the_window():
    starts, ends = (t.replace(microsecond=t.microsecond // 1000 * 1000)  # whole ms, as kept
                    for t in (in_seconds(60), in_seconds(120)))
    sale_reset(sku="sku-1", stock=5, starts_at=starts, ends_at=ends)
    audit = sale_audit(sku="sku-1")
    assert (audit.starts_at, audit.ends_at) == (starts, ends)
    sale_reset(sku="sku-1", stock=5, ends_at=ends)  # open at once, until its end
    assert buy("k0").order_id
    sale_reset(sku="sku-1", stock=5)  # a reset without a window opens at once, for ever
    assert (sale_audit(sku="sku-1").starts_at, sale_audit(sku="sku-1").ends_at) == (None, None)
    assert buy().order_id


@pytest.mark.parametrize("window", [
    {"ends_at": in_seconds(-60)},  # ended already: how a sale is closed
    {"starts_at": in_seconds(60), "ends_at": in_seconds(30)},  # never opens
])
def test_a_window_that_has_ended_or_never_opens_is_a_closed_sale(strategy, window):
    sale_reset(sku="sku-1", stock=5, **window)
    with pytest.raises(Ended):
        buy()
    assert nothing_written(5)


# --- the API -----------------------------------------------------------------------------


@pytest.fixture
def admin():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token test-admin-token")
    return client


def reset(admin, **body):
    return admin.post("/api/admin/products/sku-1/reset", {"stock": 5, **body}, format="json")


@override_settings(FLASHSALE_STRATEGY="atomic")
def test_the_api_answers_409_not_started_with_retry_after_and_shows_the_window(admin):
    asked = datetime.now(UTC)
    response = reset(admin, starts_in=20, ends_in=60)
    assert response.status_code == 200, response.json()
    product = APIClient().get("/api/products/sku-1").json()
    answered = datetime.now(UTC)
    starts = datetime.fromisoformat(product["starts_at"])
    ends = datetime.fromisoformat(product["ends_at"])
    # 20 s after a moment of the request, however long it took (stored to the millisecond)
    assert asked + timedelta(seconds=20, milliseconds=-1) <= starts <= answered + timedelta(seconds=20)
    assert (ends - starts).total_seconds() == pytest.approx(40, abs=0.01)
    answer = APIClient().post("/api/orders", {"sku": "sku-1", "quantity": 1, "user_id": "u1"}, format="json",
                              HTTP_IDEMPOTENCY_KEY="k1")
    assert answer.status_code == 409 and answer.json()["error"] == "not_started"
    assert abs(datetime.fromisoformat(answer.json()["starts_at"]) - starts) < timedelta(milliseconds=1)
    assert answer.headers["Retry-After"] in {"19", "20"}
    assert nothing_written(5)


@override_settings(FLASHSALE_STRATEGY="atomic")
def test_a_moment_past_what_utc_can_hold_is_taken_as_its_last(admin):
    response = reset(admin, starts_at="0001-01-01T00:00:00+14:00", ends_at="9999-12-31T23:59:59-14:00")
    assert response.status_code == 200, response.json()
    assert (response.json()["starts_at"], response.json()["ends_at"]) == (
        "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999000Z")  # in whole ms, as the gate keeps it
    assert buy().order_id  # open: it started at the first moment, ends at the last


@override_settings(FLASHSALE_STRATEGY="atomic")
@pytest.mark.parametrize("body, field", [
    ({"starts_in": 5, "starts_at": "2030-01-01T00:00:00Z"}, "starts_in"),
    ({"ends_in": 5, "ends_at": "2030-01-01T00:00:00Z"}, "ends_in"),
    ({"starts_in": -1}, "starts_in"),
    ({"starts_at": "tomorrow"}, "starts_at"),
])
def test_a_window_that_cannot_be_is_400_and_changes_nothing(admin, body, field):
    sale_reset(sku="sku-1", stock=3)
    response = reset(admin, **body)
    assert response.status_code == 400 and field in response.json()["fields"], response.json()
    assert sale_audit(sku="sku-1").initial_stock == 3
