import pytest
from django.db import transaction

from flashsale.errors import NotFound
from flashsale.strategies import Deduction
from inventory.models import Stock
from inventory.selectors import product_get, stock_audit
from inventory.services import stock_deduct


@pytest.fixture
def sold_three(product_factory):
    product = product_factory(stock=5)
    with transaction.atomic():
        for n, q in enumerate([1, 2]):
            stock_deduct(product=product, quantity=q, operation_flag=f"op-{n}",
                         order_reference=str(n), deduction=Deduction.CONDITIONAL_UPDATE)
    return product


@pytest.mark.django_db
def test_audit_of_a_clean_sale_is_consistent(sold_three):
    audit = stock_audit(product=sold_three, ordered_quantity=3, order_references=["0", "1"])
    assert audit.as_dict() == {
        "sku": "sku-1", "initial_stock": 5, "remaining": 2, "orders": 2, "ordered_quantity": 3,
        "flow_rows": 2, "flow_quantity": 3, "oversold": 0, "lost_updates": 0, "consistent": True,
        "segments_remaining": (2,),
    }


@pytest.mark.django_db
def test_audit_counts_oversell_and_lost_updates(sold_three):
    # Orders the stock never saw: 3 more units than the stock lost, 1 beyond the start.
    audit = stock_audit(product=sold_three, ordered_quantity=6, order_references=["0", "1", "2"])
    assert (audit.oversold, audit.lost_updates, audit.consistent) == (1, 3, False)


@pytest.mark.django_db
def test_audit_flags_a_ledger_that_does_not_match_the_orders(sold_three):
    audit = stock_audit(product=sold_three, ordered_quantity=3, order_references=["0", "9"])
    assert audit.lost_updates == 0 and not audit.consistent


@pytest.mark.django_db
def test_audit_flags_a_stock_write_without_a_flow_row(sold_three):
    Stock.objects.filter(product=sold_three).update(quantity=1)
    audit = stock_audit(product=sold_three, ordered_quantity=3, order_references=["0", "1"])
    assert audit.lost_updates == -1 and not audit.consistent


@pytest.mark.django_db
def test_product_get_unknown_sku_is_not_found():
    with pytest.raises(NotFound):
        product_get(sku="nope")
