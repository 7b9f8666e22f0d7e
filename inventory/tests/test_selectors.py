from datetime import UTC, datetime

import pytest
from django.db import transaction

from common.errors import NotFound
from common.strategies import Deduction
from inventory.models import Stock
from inventory.selectors import product_get, segments_get, stock_audit
from inventory.services import Operation, product_reset, stock_deduct
from inventory.tests.ledger import ledger_of


@pytest.fixture
def sold_three(product_factory):
    product = product_factory(stock=5)
    with transaction.atomic():
        for n, q in enumerate([1, 2]):
            stock_deduct(product=product, quantity=q, operation=Operation(f"op-{n}", str(n)),
                         deduction=Deduction.CONDITIONAL_UPDATE)
    return product


@pytest.mark.django_db
def test_audit_of_a_clean_sale_is_consistent(sold_three):
    audit = stock_audit(product=sold_three, ordered_quantity=3, ledger=ledger_of(sold_three, ["0", "1"]))
    assert audit.as_dict() == {
        "sku": "sku-1", "initial_stock": 5, "remaining": 2, "orders": 2, "ordered_quantity": 3,
        "flow_rows": 2, "flow_quantity": 3, "oversold": 0, "lost_updates": 0, "consistent": True,
        "segments_remaining": (2,), "returned_quantity": 0,
    }


@pytest.mark.django_db
def test_audit_counts_oversell_and_lost_updates(sold_three):
    # Orders the stock never saw: 3 more units than the stock lost, 1 beyond the start.
    audit = stock_audit(product=sold_three, ordered_quantity=6, ledger=ledger_of(sold_three, ["0", "1", "2"]))
    assert (audit.oversold, audit.lost_updates, audit.consistent) == (1, 3, False)


@pytest.mark.django_db
def test_audit_flags_a_ledger_that_does_not_match_the_orders(sold_three):
    audit = stock_audit(product=sold_three, ordered_quantity=3, ledger=ledger_of(sold_three, ["0", "9"]))
    assert audit.lost_updates == 0 and not audit.consistent


@pytest.mark.django_db
def test_audit_flags_a_stock_write_without_a_flow_row(sold_three):
    Stock.objects.filter(product=sold_three).update(quantity=1)
    audit = stock_audit(product=sold_three, ordered_quantity=3, ledger=ledger_of(sold_three, ["0", "1"]))
    assert audit.lost_updates == -1 and not audit.consistent


@pytest.mark.django_db
def test_product_get_unknown_sku_is_not_found():
    with pytest.raises(NotFound):
        product_get(sku="nope")


def _fields(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


@pytest.mark.django_db
@pytest.mark.parametrize("window", [False, True], ids=["no-window", "window"])
def test_the_segments_read_answers_what_the_orm_query_does(window, django_assert_num_queries):
    """``segments_get`` builds its SQL once; the ORM's query is the reference: the
    same rows, the same values of the same types (the window's moments aware, in
    UTC), each segment's product there without another query."""
    starts_at = datetime(2026, 11, 24, 9, 0, 0, 123000, tzinfo=UTC) if window else None
    ends_at = datetime(2026, 11, 24, 10, 0, tzinfo=UTC) if window else None
    product = product_reset(sku="sku-1", stock=10, name="Phone", segments=3, starts_at=starts_at,
                            ends_at=ends_at, strategy="redisson")
    Stock.objects.filter(product=product, segment=1).update(quantity=2, version=7, fence_source="setnx",
                                                          fence=42)
    product_reset(sku="sku-0", stock=1)  # another product: not in the answer
    reference = list(Stock.objects.select_related("product").filter(product__sku="sku-1").order_by("segment"))
    with django_assert_num_queries(1):
        segments = segments_get(sku="sku-1")
        products = [s.product for s in segments]
    assert [_fields(s) for s in segments] == [_fields(s) for s in reference]
    assert [_fields(p) for p in products] == [_fields(s.product) for s in reference]
    types = [type(v) for v in _fields(products[0]).values()]
    assert types == [type(v) for v in _fields(reference[0].product).values()]
    assert products[0].starts_at == starts_at and products[0] is products[-1]
    assert not segments[0]._state.adding and segments[0]._state.db == "default"


@pytest.mark.django_db
def test_the_segments_read_of_an_unknown_sku_is_not_found():
    with pytest.raises(NotFound):
        segments_get(sku="no-such-sku")
