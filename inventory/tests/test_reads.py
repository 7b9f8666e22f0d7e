"""The product page's cached read (``inventory.reads``), on the real Redis and
MariaDB: no query while the entry is fresh, the stock figure at most the freshness
behind after a purchase, one rebuild per stale period however many read, a reset
seen at once, and a Redis that cannot be reached costing the query, not the page."""

import time

import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

import inventory.reads
from common.testing import run_at_once
from inventory.reads import product_cached_get
from inventory.selectors import product_stock_get
from orders.purchase import order_create
from orders.reset import sale_reset
from stack.scratch import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_for_200_ms():
    # The process-local layer off (0 ms) except where a test turns it on: these
    # tests are about the shared entry.
    with override_settings(FLASHSALE_PRODUCT_FRESH_MS=200, FLASHSALE_PRODUCT_LOCAL_MS=0,
                           FLASHSALE_STRATEGY="atomic"):
        yield


def test_a_fresh_entry_is_answered_without_a_query():
    # Fresh for the whole test, however long a busy machine takes over its 20 reads:
    # at 200 ms they could outlast it, and a stale entry is rightly read again.
    with override_settings(FLASHSALE_PRODUCT_FRESH_MS=60_000):
        sale_reset(sku="sku-1", stock=10)  # writes the entry
        with CaptureQueriesContext(connection) as queries:
            for _ in range(20):
                assert product_cached_get(sku="sku-1").stock == 10
    assert len(queries) == 0


def test_after_a_purchase_the_stock_shows_within_the_freshness():
    sale_reset(sku="sku-1", stock=10)
    order_create(sku="sku-1", quantity=3, user_id="u1")
    time.sleep(0.25)  # past the 200 ms freshness
    assert product_cached_get(sku="sku-1").stock == 7  # this reader rebuilt it


def test_a_stale_entry_is_rebuilt_once_however_many_read_it_and_nobody_waits(monkeypatch):
    sale_reset(sku="sku-1", stock=10)
    order_create(sku="sku-1", quantity=1, user_id="u1")
    time.sleep(0.25)
    reads = []

    def counted(*, sku):  # the real read of the row, counted
        reads.append(sku)
        return product_stock_get(sku=sku)

    monkeypatch.setattr(inventory.reads, "product_stock_get", counted)
    seen = []
    # The entry stays stale (it says when it stops being fresh); what its rebuild
    # writes stays fresh however long a busy machine takes to run the 32 readers,
    # which at 200 ms would meet a second stale period and rightly rebuild again.
    with override_settings(FLASHSALE_PRODUCT_FRESH_MS=60_000):
        errors = run_at_once(lambda i: seen.append(product_cached_get(sku="sku-1").stock), 32)
        assert errors == [None] * 32, errors
        # Every reader answered (the stale 10, or the 9 that its rebuild read), none
        # waited for another, and the row was read once.
        assert len(seen) == 32 and set(seen) <= {9, 10}, seen
        assert reads == ["sku-1"]
        assert product_cached_get(sku="sku-1").stock == 9


def test_a_reset_is_seen_at_once_with_its_window():
    sale_reset(sku="sku-1", stock=10)
    assert product_cached_get(sku="sku-1").stock == 10
    sale_reset(sku="sku-1", stock=4, ends_at=None)
    product = product_cached_get(sku="sku-1")
    assert (product.stock, product.initial_stock) == (4, 4)


def test_a_redis_that_cannot_be_reached_costs_the_query_not_the_page():
    sale_reset(sku="sku-1", stock=10)
    nowhere = {"default": {**settings.CACHES["default"], "LOCATION": f"redis://127.0.0.1:{free_port()}/0"}}
    with override_settings(CACHES=nowhere), CaptureQueriesContext(connection) as queries:
        response = APIClient().get("/api/products/sku-1")
    assert response.status_code == 200 and response.json()["stock"] == 10
    assert len(queries) == 1


def test_each_process_keeps_what_it_read_for_its_local_period():
    sale_reset(sku="sku-1", stock=10)
    # A local period the test outlasts on no machine: what it shows is who keeps what.
    with override_settings(FLASHSALE_PRODUCT_LOCAL_MS=60_000):
        assert product_cached_get(sku="sku-1").stock == 10
        cache.delete("product:sku-1")  # Redis' entry gone: the local copy still answers
        with CaptureQueriesContext(connection) as queries:
            assert product_cached_get(sku="sku-1").stock == 10
        assert len(queries) == 0
        sale_reset(sku="sku-1", stock=3)  # this process's reset drops its copy
        assert product_cached_get(sku="sku-1").stock == 3
