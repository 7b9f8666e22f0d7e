"""``rows_insert`` writes what ``bulk_create`` writes, on the real MariaDB."""

from __future__ import annotations

import datetime

import pytest
from django.db import IntegrityError, transaction
from django.forms.models import model_to_dict
from django.utils import timezone

from common.bulk import rows_insert
from inventory.models import StockFlow
from inventory.services import product_reset
from orders.models import Order

ACCEPTED = datetime.datetime(2026, 11, 24, 12, 30, 15, 123000, tzinfo=datetime.UTC)
FIELDS = ("id", "user_id", "product", "quantity", "idempotency_key", "instance", "strategy", "accepted_at")


@pytest.fixture
def product(db):
    return product_reset(sku="bulk-1", stock=10)


def _written(**filters) -> list[dict]:
    return [model_to_dict(order, exclude=["id", "idempotency_key", "created_at"])
            for order in Order.objects.filter(**filters).order_by("pk")]


@pytest.mark.django_db
def test_the_rows_read_back_as_bulk_creates_do(product):
    before = timezone.now()
    rows_insert(Order, FIELDS, [(2, "u-é", product.pk, 3, "k-1", "i-1", "gate", ACCEPTED),
                                (4, "u2", product.pk, 1, "k-2", "i-1", "gate", None)])
    after = timezone.now()
    Order.objects.bulk_create([
        Order(pk=6, user_id="u-é", product=product, quantity=3, idempotency_key="k-3", instance="i-1",
              strategy="gate", accepted_at=ACCEPTED),
        Order(pk=8, user_id="u2", product=product, quantity=1, idempotency_key="k-4", instance="i-1",
              strategy="gate", accepted_at=None)])
    assert _written(pk__in=[2, 4]) == _written(pk__in=[6, 8])
    first = Order.objects.get(pk=2)
    assert first.accepted_at == ACCEPTED
    assert first.retries == 0  # the field's default
    assert before - datetime.timedelta(seconds=1) <= first.created_at <= after  # auto_now_add


@pytest.mark.django_db
def test_a_field_left_out_without_a_default_is_refused(product):
    with pytest.raises(ValueError, match="Order.user_id has no default"):
        rows_insert(Order, ("id", "product", "quantity", "idempotency_key", "instance", "strategy"),
                    [(2, product.pk, 1, "k-1", "i-1", "gate")])
    assert not Order.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_row_that_breaks_a_constraint_writes_none_of_the_statement(product):
    flow = ("product", "segment", "quantity", "operation_flag", "order_reference", "quantity_before",
            "quantity_after", "instance")
    rows_insert(StockFlow, flow, [(product.pk, 0, 1, "op-1", "2", 10, 9, "i-1")])
    with pytest.raises(IntegrityError), transaction.atomic():
        rows_insert(StockFlow, flow, [(product.pk, 0, 1, "op-2", "4", 9, 8, "i-1"),
                                      (product.pk, 0, 1, "op-1", "6", 8, 7, "i-1")])
    assert list(StockFlow.objects.values_list("operation_flag", flat=True)) == ["op-1"]


@pytest.mark.django_db
def test_no_rows_is_no_statement(product, django_assert_num_queries):
    with django_assert_num_queries(0):
        rows_insert(Order, FIELDS, [])
