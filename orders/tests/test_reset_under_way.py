"""A reset while buyers buy: no order lands in the new sale on the old sale's terms.

A purchase checks the sale's terms (its window, its waiting room, its payment window)
and then takes the stock; a reset may commit between the two. Each race below is
held open at that moment, deterministically: the purchase is paused there (a wrapper
that waits, then calls the real step), the reset runs to its answer, and the
purchase goes on. On the real MariaDB, Redis and ZooKeeper, under every strategy
that sells in a database transaction (the gate closes its sale before a reset:
``test_gate.py``).
"""

import threading
from datetime import UTC, datetime, timedelta

import pytest
import redis
from django.core.cache import caches
from django.test import override_settings

from common.errors import NotStarted, SaleReplaced, Unavailable
from common.strategies import STRATEGIES
from common.testing import start_thread
from inventory.models import Product, Stock, StockFlow
from orders.models import Order
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.salestate import sale_state_get
from orders.transaction import sell
from waitingroom.services import RoomTerms

pytestmark = pytest.mark.django_db(transaction=True)

TRANSACTION_STRATEGIES = [name for name, spec in STRATEGIES.items() if not spec.gated]

# The new sale's terms, as the lifecycle issue's recipe set them: every one of them
# refuses a purchase now (it opens in an hour, behind a room), and an order it took
# would wait for its payment.
NEW_TERMS = dict(stock=100, starts_at=datetime.now(UTC) + timedelta(hours=1), payment_window_s=300,
                 room=RoomTerms.given(rate=1))


def bought_across_a_reset(monkeypatch, strategy: str, step: str) -> dict:
    """A purchase paused as it calls ``orders.transaction.sell``'s ``step`` (only its
    first call), the sale reset to ``NEW_TERMS`` meanwhile, then let go: its outcome
    ("value" or "error")."""
    real, reached, go = getattr(sell, step), threading.Event(), threading.Event()

    def wait_then_call(*args, **kwargs):
        if not reached.is_set():
            reached.set()
            assert go.wait(30), "never let go"
        return real(*args, **kwargs)

    monkeypatch.setattr(sell, step, wait_then_call)
    buyer, outcome = start_thread(lambda: order_create(sku="sku-1", quantity=1, user_id="u1",
                                                       idempotency_key="k1"), daemon=True)
    try:
        assert reached.wait(30)
        sale_reset(sku="sku-1", strategy=strategy, **NEW_TERMS)
    finally:
        go.set()
    buyer.join(30)
    return outcome


def the_new_sale_untouched(sku: str) -> bool:
    product = Product.objects.get(sku=sku)
    return (Order.objects.filter(product=product).count(), StockFlow.objects.filter(product=product).count(),
            sum(Stock.objects.filter(product=product).values_list("quantity", flat=True))) == (0, 0, 100)


@pytest.fixture(params=TRANSACTION_STRATEGIES)
def strategy(request):
    with override_settings(FLASHSALE_STRATEGY=request.param):
        yield request.param


def test_a_purchase_admitted_by_the_old_terms_takes_nothing_from_the_new_sale(strategy, monkeypatch):
    sale_reset(sku="sku-1", stock=5, strategy=strategy)  # open now, no room, no payment step
    order_create(sku="sku-1", quantity=1, user_id="u0", idempotency_key="k0")  # the plan read: this sale's
    # Paused after the sale's terms were checked, before its stock is taken.
    outcome = bought_across_a_reset(monkeypatch, strategy, "_group_bought")
    assert isinstance(outcome.get("error"), SaleReplaced), outcome
    assert outcome["error"].status_code == 503
    assert the_new_sale_untouched("sku-1")


def test_a_purchase_that_read_the_old_state_and_the_new_rows_is_held_to_the_new_terms(strategy, monkeypatch):
    sale_reset(sku="sku-1", stock=5, strategy=strategy)
    # Paused with the old sale's state in hand (it says: open, no room), before it
    # reads the rows: the reset commits the new ones meanwhile.
    outcome = bought_across_a_reset(monkeypatch, strategy, "_sale_checked")
    assert isinstance(outcome.get("error"), NotStarted), outcome
    assert the_new_sale_untouched("sku-1")


@override_settings(FLASHSALE_STRATEGY="atomic")
def test_a_reset_that_cannot_write_the_sales_state_is_503_and_resets_nothing(monkeypatch):
    sale_reset(sku="sku-1", stock=5)
    order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k1")
    before = sale_state_get(sku="sku-1")

    def refused(*args, **kwargs):
        raise redis.ConnectionError("Redis is restarting")

    monkeypatch.setattr(caches["default"], "set", refused)  # the state's write fails
    with pytest.raises(Unavailable) as caught:
        sale_reset(sku="sku-1", **NEW_TERMS)
    monkeypatch.undo()
    assert caught.value.status_code == 503 and caught.value.extra["backend"] == "redis"
    product = Product.objects.get(sku="sku-1")
    assert (product.sale, product.starts_at, product.payment_window_s) == (before.opening.sale, None, 0)
    assert Order.objects.count() == 1 and sum(Stock.objects.values_list("quantity", flat=True)) == 4
    # No state names a sale that did not commit: the next purchase reads the rows.
    assert sale_state_get(sku="sku-1").opening is None
    assert not order_create(sku="sku-1", quantity=1, user_id="u2", idempotency_key="k2").replayed
