"""The strategy switch's barrier (``orders.barrier``): an instance started held sells
nothing until its file exists, and a purchase still held at its deadline writes
nothing. On the real MariaDB and Redis."""

from __future__ import annotations

import threading
import time

import pytest
from django.test import override_settings

from common.errors import Busy
from orders import barrier
from orders.models import Order
from orders.purchase import order_create
from orders.reset import sale_reset

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def held(tmp_path, monkeypatch):
    """The file this process's purchases wait for, absent; the process not yet released."""
    monkeypatch.setattr(barrier, "_released", False)
    path = tmp_path / "released"
    with override_settings(FLASHSALE_PURCHASES_HELD_UNTIL_FILE=str(path), FLASHSALE_PURCHASE_DEADLINE_S=1.0):
        yield path


# Released well before its deadline on any machine: what the deadline leaves after the
# release covers the purchases themselves, however slowly this machine runs them.
@override_settings(FLASHSALE_PURCHASE_DEADLINE_S=30.0)
def test_a_held_purchase_sells_once_the_file_appears(held):
    sale_reset(sku="held-1", stock=5, strategy="atomic")
    started = time.monotonic()  # before the timer's start: it touches 0.4 s after that at least
    threading.Timer(0.4, held.touch).start()
    result = order_create(sku="held-1", quantity=1, user_id="u1", idempotency_key="k-held-1")
    assert result.status == "confirmed" and time.monotonic() - started >= 0.4
    # Released for good: the file's removal does not hold this process again.
    held.unlink()
    order_create(sku="held-1", quantity=1, user_id="u2")
    assert Order.objects.filter(product__sku="held-1").count() == 2


def test_a_purchase_held_to_its_deadline_is_busy_and_writes_nothing(held):
    sale_reset(sku="held-2", stock=5, strategy="atomic")
    started = time.monotonic()
    with pytest.raises(Busy, match="switching strategy"):
        order_create(sku="held-2", quantity=1, user_id="u1", idempotency_key="k-held-2")
    assert time.monotonic() - started >= 0.9  # it waited to its deadline
    assert not Order.objects.filter(product__sku="held-2").exists()
    # The key was never claimed: once released, its purchase sells.
    held.touch()
    result = order_create(sku="held-2", quantity=1, user_id="u1", idempotency_key="k-held-2")
    assert result.status == "confirmed"


def test_not_held_without_the_setting(monkeypatch):
    monkeypatch.setattr(barrier, "_released", False)
    sale_reset(sku="held-3", stock=1, strategy="atomic")
    assert order_create(sku="held-3", quantity=1, user_id="u1").status == "confirmed"
