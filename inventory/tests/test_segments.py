"""Segmented stock (article 004's 分段锁): the split, the plan of which segments a
purchase tries, and deductions that take from several segments, on the real MariaDB."""

import random

import pytest
from django.db import IntegrityError, transaction
from django.test import override_settings

from common.errors import SoldOut, StockChanged
from common.strategies import Deduction
from common.testing import in_thread
from inventory.faults import stalled
from inventory.limits import MAX_SEGMENTS
from inventory.models import Stock, StockFlow
from inventory.selectors import stock_audit
from inventory.services import Fence, Operation, product_reset, stock_deduct, stock_plan
from inventory.tests.ledger import ledger_of


def segments(*quantities):
    return [Stock(segment=n, quantity=q, initial_quantity=q) for n, q in enumerate(quantities)]


class First:
    """An rng whose choice is always the first: the plan's order without chance."""

    def randrange(self, n):
        return 0


def test_the_plan_tries_every_segment_that_has_enough_from_a_random_start():
    plan = stock_plan(segments(5, 0, 5, 1), 2, rng=First())
    assert plan == [[0], [2]]  # segment 1 is empty and 3 has too little
    firsts = {stock_plan(segments(5, 5, 5, 5), 1, rng=random.Random(seed))[0][0] for seed in range(40)}
    assert firsts == {0, 1, 2, 3}  # buyers spread: not always the first
    rotated = stock_plan(segments(5, 5, 5, 5), 1, rng=random.Random(7))
    assert sorted(g[0] for g in rotated) == [0, 1, 2, 3]  # and all of them, once each


def test_when_no_segment_has_enough_the_plan_takes_the_fewest_fullest_together():
    assert stock_plan(segments(1, 3, 0, 2), 4) == [[1, 3]]  # 3 + 2 cover 4
    assert stock_plan(segments(1, 1, 1, 1), 3) == [[0, 1, 2]]


def test_when_not_even_all_together_have_enough_the_plan_asks_them_all():
    # The read may be stale; the deduction under every segment's lock decides.
    assert stock_plan(segments(1, 0, 1), 3) == [[0, 1, 2]]
    assert stock_plan(segments(0), 1) == [[0]]


@pytest.mark.django_db
@pytest.mark.parametrize(("stock", "parts", "split"), [
    (10, 4, [3, 3, 2, 2]), (3, 4, [1, 1, 1, 0]), (7, 1, [7]), (0, 2, [0, 0])])
def test_a_reset_splits_the_stock_as_evenly_as_units_allow(stock, parts, split):
    product = product_reset(sku="seg", stock=stock, segments=parts)
    rows = Stock.objects.filter(product=product).order_by("segment")
    assert [(r.segment, r.quantity, r.initial_quantity) for r in rows] == [
        (n, q, q) for n, q in enumerate(split)]


@pytest.mark.django_db
@override_settings(FLASHSALE_STOCK_SEGMENTS=3)
def test_a_reset_without_a_count_takes_the_setting_and_a_new_count_replaces_the_rows():
    product = product_reset(sku="seg", stock=9)
    assert Stock.objects.filter(product=product).count() == 3
    product_reset(sku="seg", stock=9, segments=2)
    assert Stock.objects.filter(product=product).count() == 2
    for bad in (-1, MAX_SEGMENTS + 1):
        with pytest.raises(ValueError):
            product_reset(sku="seg", stock=9, segments=bad)


def take(product, quantity, group, deduction, fences=None, flag="op-1"):
    with transaction.atomic():
        return stock_deduct(product=product, quantity=quantity, operation=Operation(flag, flag),
                            deduction=deduction, segments=group, fences=fences)


@pytest.mark.django_db
@pytest.mark.parametrize("deduction", list(Deduction))
def test_one_order_takes_from_several_segments_in_order_with_a_ledger_row_each(deduction):
    product = product_reset(sku="seg", stock=6, segments=3)  # 2, 2, 2
    fenced = deduction is Deduction.READ_MODIFY_WRITE  # each segment's own lock's token
    fences = {2: Fence("setnx", 7), 0: Fence("setnx", 3)} if fenced else None
    deducted = take(product, 3, [2, 0], deduction, fences)
    assert deducted.remaining == 1  # 0 left in segment 2, 1 in segment 0
    assert list(Stock.objects.filter(product=product).order_by("segment")
                .values_list("quantity", flat=True)) == [1, 2, 0]
    flows = StockFlow.objects.filter(product=product).order_by("segment")
    assert [(f.segment, f.quantity, f.quantity_before, f.quantity_after) for f in flows] == [
        (0, 1, 2, 1), (2, 2, 2, 0)]
    audit = stock_audit(product=product, ordered_quantity=3, ledger=ledger_of(product, ["op-1"]))
    assert audit.consistent and audit.segments_remaining == (1, 2, 0) and audit.remaining == 3
    if fenced:
        stamped = Stock.objects.filter(product=product).order_by("segment").values_list("fence", flat=True)
        assert list(stamped) == [3, 0, 7]


@pytest.mark.django_db
@pytest.mark.parametrize("deduction", list(Deduction))
def test_a_group_that_cannot_serve_is_sold_out_and_writes_nothing(deduction):
    product = product_reset(sku="seg", stock=4, segments=4)  # 1 each
    with pytest.raises(SoldOut) as caught:
        take(product, 3, [0, 1], deduction)
    assert caught.value.extra["remaining"] == 2  # what the group had
    assert not StockFlow.objects.exists()
    assert set(Stock.objects.values_list("quantity", flat=True)) == {1}


@pytest.mark.django_db(transaction=True)
def test_a_conditional_write_over_several_segments_refuses_a_segment_drained_after_its_read():
    product = product_reset(sku="seg", stock=4, segments=2)  # 2, 2

    def another_buyer_drains_segment_1(point):
        if point == "read":  # after this purchase read both segments, before it writes
            in_thread(lambda: Stock.objects.filter(product=product, segment=1).update(quantity=0))

    with stalled(another_buyer_drains_segment_1), pytest.raises(StockChanged):
        take(product, 3, [0, 1], Deduction.CONDITIONAL_UPDATE)
    assert not StockFlow.objects.exists()
    assert list(Stock.objects.order_by("segment").values_list("quantity", flat=True)) == [2, 0]


@pytest.mark.django_db
def test_the_same_operation_is_recorded_once_per_segment():
    product = product_reset(sku="seg", stock=4, segments=2)
    take(product, 1, [0], Deduction.CONDITIONAL_UPDATE, flag="op-x")
    take(product, 1, [1], Deduction.CONDITIONAL_UPDATE, flag="op-x")  # another segment: allowed here
    with pytest.raises(IntegrityError):
        take(product, 1, [0], Deduction.CONDITIONAL_UPDATE, flag="op-x")
