import contextlib
import random
import threading
import time

import pytest
from django.core.cache import cache
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from common.errors import Busy, IdempotencyConflict, InvalidInput, NotFound, SoldOut
from common.testing import held_elsewhere, in_thread, start_thread
from inventory.faults import stalled
from inventory.models import Stock, StockFlow
from locking import BaseLock, BaseLockBackend, get_lock
from locking.backends.local import LocalLock, LocalLockBackend
from orders.idempotency import flag_claim
from orders.models import Order
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.salestate import sale_state_get
from orders.selectors import sale_audit


def counts() -> tuple[int, int]:
    return Order.objects.count(), StockFlow.objects.count()


@pytest.fixture
def product(product_factory):
    return product_factory(sku="sku-1", stock=10)


@pytest.mark.django_db
def test_order_deducts_and_links_one_flow_row(product):
    result = order_create(sku="sku-1", quantity=2, user_id="u1", idempotency_key="k1")
    assert not result.replayed and result.remaining == 8
    order = Order.objects.get(pk=result.order_id)
    assert (order.quantity, order.user_id, order.strategy, order.instance) == (2, "u1", "atomic", "test")
    assert (result.quantity, result.strategy, result.status) == (2, "atomic", "confirmed")
    assert order.pk % 2 == 1  # MySQL's ids are odd: the gate's are even
    flow = StockFlow.objects.get(operation_flag="k1")
    assert flow.order_reference == str(order.pk) and flow.quantity == 2
    assert Stock.objects.get(product=product).quantity == 8


@pytest.mark.django_db
def test_replayed_key_returns_the_original_order_once(product):
    first = order_create(sku="sku-1", quantity=2, user_id="u1", idempotency_key="k1")
    order_create(sku="sku-1", quantity=1, user_id="u2", idempotency_key="k2")
    again = order_create(sku="sku-1", quantity=2, user_id="u1", idempotency_key="k1")
    assert again.replayed
    assert again.order_id == first.order_id
    assert again.remaining == first.remaining == 8  # the original answer, not today's stock
    assert counts() == (2, 2)
    assert Stock.objects.get(product=product).quantity == 7


@pytest.mark.django_db
def test_replay_after_the_redis_flag_is_lost_is_caught_by_the_unique_key(product):
    first = order_create(sku="sku-1", quantity=2, user_id="u1", idempotency_key="k1")
    cache.clear()  # Redis flushed or the flag expired: only the database remembers
    again = order_create(sku="sku-1", quantity=2, user_id="u1", idempotency_key="k1")
    assert again.replayed and again.order_id == first.order_id
    assert counts() == (1, 1)
    assert Stock.objects.get(product=product).quantity == 8


@pytest.mark.django_db
@pytest.mark.parametrize("change", [{"quantity": 3}, {"user_id": "u2"}])
def test_key_reused_for_a_different_request_conflicts(product, change):
    order_create(sku="sku-1", quantity=2, user_id="u1", idempotency_key="k1")
    with pytest.raises(IdempotencyConflict):
        order_create(**{"sku": "sku-1", "quantity": 2, "user_id": "u1", **change}, idempotency_key="k1")
    assert counts() == (1, 1)


@pytest.mark.django_db
@override_settings(FLASHSALE_INFLIGHT_WAIT_S=0.3)
def test_key_still_in_flight_elsewhere_past_the_wait_is_busy(product):
    flag_claim(key="k1", fingerprint=_fingerprint_of(sku="sku-1", quantity=1, user_id="u1"))
    started = time.monotonic()
    with pytest.raises(Busy) as caught:
        order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k1")
    assert time.monotonic() - started >= 0.3  # it waited for the first request, boundedly
    assert caught.value.headers["Retry-After"] == "1"
    assert counts() == (0, 0)


@pytest.mark.django_db(transaction=True)
def test_a_retry_while_the_first_request_is_in_flight_waits_and_answers_its_order(product):
    first_inside, let_go = threading.Event(), threading.Event()

    def first_request_is_slow(point):
        if point == "start":  # the first request holds its key and is inside the purchase
            first_inside.set()
            let_go.wait(10)

    def first():
        with stalled(first_request_is_slow):
            return order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k1")

    thread, box = start_thread(first)
    assert first_inside.wait(10)
    threading.Timer(0.3, let_go.set).start()  # it finishes while the retry waits (2 s)
    retry = order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k1")
    thread.join()
    assert retry.replayed and retry.order_id == box["value"].order_id
    assert counts() == (1, 1)


def _fingerprint_of(**request):
    from orders.idempotency import request_fingerprint as _fingerprint

    return _fingerprint(**request)


@pytest.mark.django_db
def test_sold_out_writes_nothing_and_frees_the_key_for_a_retry(product_factory):
    product_factory(sku="sku-1", stock=1)
    with pytest.raises(SoldOut):
        order_create(sku="sku-1", quantity=2, user_id="u1", idempotency_key="k1")
    assert counts() == (0, 0)
    sale_reset(sku="sku-1", stock=5)
    assert not order_create(sku="sku-1", quantity=2, user_id="u1", idempotency_key="k1").replayed


@pytest.mark.django_db
@pytest.mark.parametrize("quantity", [0, -1, 6])
def test_quantity_out_of_range_is_invalid(product, quantity):
    with pytest.raises(InvalidInput):
        order_create(sku="sku-1", quantity=quantity, user_id="u1")
    assert counts() == (0, 0)


@pytest.mark.django_db
def test_unknown_sku_is_not_found():
    with pytest.raises(NotFound):
        order_create(sku="nope", quantity=1, user_id="u1")
    assert counts() == (0, 0)


@pytest.mark.django_db
def test_orders_without_a_key_are_each_their_own_operation(product):
    order_create(sku="sku-1", quantity=1, user_id="u1")
    order_create(sku="sku-1", quantity=1, user_id="u1")
    assert counts() == (2, 2)


@pytest.mark.django_db
def test_sale_reset_clears_orders_ledger_and_flags(product):
    order_create(sku="sku-1", quantity=2, user_id="u1", idempotency_key="k1")
    sale_reset(sku="sku-1", stock=3)
    assert counts() == (0, 0)
    assert Stock.objects.get(product=product).quantity == 3
    # The key is free again: a new purchase, not a replay of a deleted order.
    assert not order_create(sku="sku-1", quantity=2, user_id="u1", idempotency_key="k1").replayed


LOCAL_FAST = {"local": {"BACKEND": "locking.backends.local.LocalLockBackend",
                        "OPTIONS": {"wait_timeout": 0.1}}}


@pytest.mark.django_db
@override_settings(FLASHSALE_STRATEGY="local", LOCKING=LOCAL_FAST)
def test_lock_not_had_in_time_is_busy_and_writes_nothing(product):
    with held_elsewhere(lambda: get_lock("stock:sku-1", alias="local")), pytest.raises(Busy) as caught:
        order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k1")
    assert caught.value.extra == {"strategy": "local"}
    assert counts() == (0, 0)
    # The failed attempt gave its key back.
    assert not order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k1").replayed


STALL_S = 0.3


def _stall_before_the_stock(point: str) -> None:
    if point == "start":  # the lock (if any) is held; the stock row is not touched yet
        time.sleep(STALL_S)


@pytest.mark.django_db
@override_settings(FLASHSALE_STRATEGY="local", LOCKING=LOCAL_FAST)
def test_a_lock_is_held_from_grant_to_release(product):
    with stalled(_stall_before_the_stock):
        result = order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k1")
    assert result.timings.hold_ms >= STALL_S * 1000  # the stall happened under the lock


@pytest.mark.django_db
def test_a_lockless_purchase_holds_the_row_from_its_write_to_the_commit(product):
    began = time.perf_counter()
    with stalled(_stall_before_the_stock):
        result = order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k1")
    took_ms = (time.perf_counter() - began) * 1000
    # atomic: the stall came before the conditional UPDATE took the row, so it is no
    # part of the hold, however long the rest of the purchase took.
    assert 0 < result.timings.hold_ms <= took_ms - STALL_S * 1000


class AskedLock(LocalLock):
    """A process-local lock that says when a thread has asked for it: a waiter's
    wait is known to have begun, however slowly its thread came to ask."""

    asked = threading.Event()

    def do_acquire(self, *, blocking, timeout):
        self.asked.set()
        return super().do_acquire(blocking=blocking, timeout=timeout)


class AskedBackend(LocalLockBackend):
    lock_class = AskedLock


@pytest.mark.django_db(transaction=True)
@override_settings(FLASHSALE_STRATEGY="local", LOCKING={
    "local": {"BACKEND": f"{__name__}.AskedBackend", "OPTIONS": {"wait_timeout": 10}}})
def test_the_lock_wait_is_the_time_until_another_holder_let_go(product):
    with held_elsewhere(lambda: get_lock("stock:sku-1", alias="local")):
        AskedLock.asked.clear()  # the holder's own ask is behind us
        buyer, box = start_thread(
            lambda: order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k1"))
        assert AskedLock.asked.wait(30), "the buyer never asked for the lock"
        time.sleep(STALL_S)  # the buyer waits from its ask to the release below
    buyer.join()
    assert box["value"].timings.lock_wait_ms >= STALL_S * 1000
    assert order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k1").timings is None


class RecordingLock(BaseLock):
    """Records, at release, whether the purchase's transaction had committed."""

    events: list[str] = []

    def do_acquire(self, *, blocking, timeout):
        self.events.append("acquire")
        return True

    def do_release(self):
        committed = not transaction.get_connection().in_atomic_block
        self.events.append("release after commit" if committed else "release inside transaction")

    def locked(self):
        return False


class RecordingBackend(BaseLockBackend):
    lock_class = RecordingLock


@pytest.mark.django_db(transaction=True)
@override_settings(LOCKING={"null": {"BACKEND": f"{__name__}.RecordingBackend"}},
                   FLASHSALE_SOLD_OUT_FAST_PATH=False)  # the sold-out purchase must reach the lock
def test_the_lock_is_released_only_after_commit(product_factory):
    product_factory(sku="sku-1", stock=1)
    RecordingLock.events.clear()
    order_create(sku="sku-1", quantity=1, user_id="u1")
    with pytest.raises(SoldOut):
        order_create(sku="sku-1", quantity=1, user_id="u1")
    assert RecordingLock.events == ["acquire", "release after commit", "acquire", "release after commit"]


@pytest.mark.django_db(transaction=True)
@override_settings(LOCKING={"null": {"BACKEND": f"{__name__}.RecordingBackend"}})
def test_once_sold_out_the_mark_answers_without_lock_or_transaction(product_factory):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    product_factory(sku="sku-1", stock=1)
    RecordingLock.events.clear()
    assert order_create(sku="sku-1", quantity=1, user_id="u1").remaining == 0
    with CaptureQueriesContext(connection) as queries, pytest.raises(SoldOut) as caught:
        order_create(sku="sku-1", quantity=1, user_id="u2")
    assert len(queries) == 0  # not even the product lookup
    assert caught.value.extra == {"sku": "sku-1", "requested": 1, "remaining": 0}
    assert RecordingLock.events == ["acquire", "release after commit"]  # the first purchase only
    sale_reset(sku="sku-1", stock=1)  # clears the mark
    assert order_create(sku="sku-1", quantity=1, user_id="u2").remaining == 0


@pytest.mark.django_db(transaction=True)
@override_settings(LOCKING={"null": {"BACKEND": f"{__name__}.RecordingBackend"}},
                   FLASHSALE_SOLD_OUT_FAST_PATH=False)
def test_without_the_mark_every_sold_out_takes_the_lock(product_factory):
    product_factory(sku="sku-1", stock=1)
    RecordingLock.events.clear()
    order_create(sku="sku-1", quantity=1, user_id="u1")
    with pytest.raises(SoldOut):
        order_create(sku="sku-1", quantity=1, user_id="u2")
    assert RecordingLock.events.count("acquire") == 2


@pytest.mark.django_db
def test_a_replay_is_answered_after_the_sale_sold_out(product_factory):
    product_factory(sku="sku-1", stock=1)
    first = order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k1")
    again = order_create(sku="sku-1", quantity=1, user_id="u1", idempotency_key="k1")
    assert again.replayed and again.order_id == first.order_id


# --- segmented stock ---------------------------------------------------------------


@pytest.fixture
def first_segment_first(monkeypatch):
    """The plan's random start is segment 0's: the order of tries without chance."""
    monkeypatch.setattr(random, "randrange", lambda n: 0)


@pytest.mark.django_db
def test_a_segmented_product_sells_exactly_its_stock_then_is_marked_sold_out(product_factory):
    product_factory(sku="seg-1", stock=10, segments=4)  # 3, 3, 2, 2
    results = [order_create(sku="seg-1", quantity=1, user_id=f"u{n}") for n in range(10)]
    assert {r.order_id for r in results} and len(results) == 10
    with pytest.raises(SoldOut) as caught:
        order_create(sku="seg-1", quantity=1, user_id="late")
    assert caught.value.extra["remaining"] == 0
    assert sale_state_get(sku="seg-1").sold_out  # the product as a whole, not one segment, ran out
    audit = sale_audit(sku="seg-1")
    assert (audit.orders, audit.remaining, audit.oversold, audit.lost_updates) == (10, 0, 0, 0)
    assert audit.consistent and audit.segments_remaining == (0, 0, 0, 0)


@pytest.mark.django_db
def test_an_order_larger_than_any_segment_takes_several_and_sold_out_means_the_total(product_factory):
    product_factory(sku="seg-1", stock=4, segments=4)  # 1 each
    big = order_create(sku="seg-1", quantity=3, user_id="u1", idempotency_key="k-big")
    assert big.remaining == 0  # the segments it took from are empty
    assert StockFlow.objects.filter(operation_flag="k-big").count() == 3
    assert not sale_state_get(sku="seg-1").sold_out  # one unit is left elsewhere
    with pytest.raises(SoldOut) as caught:
        order_create(sku="seg-1", quantity=2, user_id="u2")
    assert caught.value.extra["remaining"] == 1  # refused only because the total cannot serve
    assert order_create(sku="seg-1", quantity=1, user_id="u3").remaining == 0
    assert sale_state_get(sku="seg-1").sold_out
    replay = order_create(sku="seg-1", quantity=3, user_id="u1", idempotency_key="k-big")
    assert replay.replayed and replay.remaining == big.remaining == 0
    audit = sale_audit(sku="seg-1")
    assert (audit.orders, audit.flow_rows, audit.remaining, audit.consistent) == (2, 4, 0, True)


@pytest.mark.django_db(transaction=True)
def test_a_segment_that_ran_dry_since_the_read_falls_over_to_the_next(product_factory,
                                                                       first_segment_first):
    product = product_factory(sku="seg-1", stock=6, segments=2)  # 3, 3
    stalls = []

    def another_buyer_empties_segment_0(point):
        if point == "start" and not stalls:  # the first try, at segment 0
            in_thread(lambda: Stock.objects.filter(product=product, segment=0).update(quantity=0))
        stalls.append(point)

    with stalled(another_buyer_empties_segment_0):
        result = order_create(sku="seg-1", quantity=1, user_id="u1", idempotency_key="k1")
    assert stalls.count("start") == 2  # segment 0 refused, segment 1 served
    assert list(StockFlow.objects.values_list("segment", flat=True)) == [1]
    assert result.remaining == 2


@pytest.mark.django_db(transaction=True)
def test_the_plan_reads_the_segments_once_per_sale_and_again_after_a_reset(db):
    sale_reset(sku="seg-1", stock=10)
    order_create(sku="seg-1", quantity=1, user_id="u1", idempotency_key="k1")
    with CaptureQueriesContext(connection) as queries:
        order_create(sku="seg-1", quantity=1, user_id="u2", idempotency_key="k2")
    assert [q["sql"].split()[0] for q in queries] == ["CALL"]  # no read: the sale's first purchase made it
    sale_reset(sku="seg-1", stock=4, segments=2)  # 2, 2: a new sale, another layout
    # 3 units need both segments: a plan from the old layout (one segment of 10)
    # would try segment 0 alone, and answer sold out.
    result = order_create(sku="seg-1", quantity=3, user_id="u3", idempotency_key="k3")
    assert result.quantity == 3
    assert sorted(StockFlow.objects.values_list("segment", flat=True)) == [0, 1]


@pytest.mark.django_db(transaction=True)
def test_a_plan_from_an_old_read_falls_over_to_the_segment_that_has_stock(db, first_segment_first):
    sale_reset(sku="seg-1", stock=4, segments=2)  # 2, 2
    order_create(sku="seg-1", quantity=1, user_id="u1", idempotency_key="k1")  # read: 2, 2; took from 0
    Stock.objects.filter(product__sku="seg-1", segment=0).update(quantity=0)  # another buyer, meanwhile
    result = order_create(sku="seg-1", quantity=1, user_id="u2", idempotency_key="k2")
    assert StockFlow.objects.get(operation_flag="k2").segment == 1 and result.remaining == 1


@pytest.mark.django_db(transaction=True)
@override_settings(FLASHSALE_STRATEGY="local", LOCKING=LOCAL_FAST)
def test_a_purchase_the_segments_together_cannot_serve_is_sold_out_without_their_locks(product_factory):
    product_factory(sku="seg-1", stock=3, segments=3)  # 1 each
    with contextlib.ExitStack() as held:
        for segment in range(3):  # a buyer that waited for any of them would be refused busy
            held.enter_context(held_elsewhere(lambda segment=segment: get_lock(f"stock:seg-1:{segment}",
                                                                               alias="local")))
        with pytest.raises(SoldOut) as caught:
            order_create(sku="seg-1", quantity=4, user_id="u1")
    assert caught.value.extra == {"sku": "seg-1", "requested": 4, "remaining": 3}
    assert Order.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_plan_whose_read_is_short_reads_again_before_it_refuses(db):
    sale_reset(sku="seg-1", stock=2, segments=2)  # 1, 1
    order_create(sku="seg-1", quantity=1, user_id="u1", idempotency_key="k1")  # the plan read 1, 1
    Stock.objects.filter(product__sku="seg-1").update(quantity=2)  # units back, the plan's read not told
    result = order_create(sku="seg-1", quantity=3, user_id="u2", idempotency_key="k2")
    assert result.quantity == 3
    assert sorted(Stock.objects.filter(product__sku="seg-1").values_list("quantity", flat=True)) == [0, 1]


@pytest.mark.django_db(transaction=True)
@override_settings(FLASHSALE_STRATEGY="local", FLASHSALE_PURCHASE_DEADLINE_S=8.0,
                   LOCKING={"local": {**LOCAL_FAST["local"], "OPTIONS": {"wait_timeout": 60.0}}})
def test_a_purchase_waits_for_its_lock_until_its_deadline_not_the_locks_longer_timeout(product,
                                                                                      monkeypatch):
    waits = []
    acquire = LocalLock.do_acquire

    def recorded(self, *, blocking, timeout):
        if threading.current_thread() is threading.main_thread():  # the purchase's, not the holder's
            waits.append(timeout)
        return acquire(self, blocking=blocking, timeout=timeout)

    monkeypatch.setattr(LocalLock, "do_acquire", recorded)
    held = held_elsewhere(lambda: get_lock("stock:sku-1", alias="local"))
    with held, pytest.raises(Busy, match="deadline"):
        # It reached the instance 7.7 s ago: 0.3 s of its 8 are left.
        order_create(sku="sku-1", quantity=1, user_id="u1", received_at=time.time() - 7.7)
    assert len(waits) == 1 and 0 < waits[0] <= 0.3, waits
    assert Order.objects.count() == 0


@pytest.mark.django_db(transaction=True)
@override_settings(FLASHSALE_STRATEGY="local", LOCKING=LOCAL_FAST)
def test_each_segment_has_a_lock_of_its_own(product_factory, monkeypatch):
    product_factory(sku="seg-1", stock=4, segments=2)
    monkeypatch.setattr(random, "randrange", lambda n: 1)  # the plan starts at segment 1
    with held_elsewhere(lambda: get_lock("stock:seg-1:0", alias="local")):
        result = order_create(sku="seg-1", quantity=1, user_id="u1")  # not blocked by segment 0
    assert StockFlow.objects.get(order_reference=str(result.order_id)).segment == 1
    with held_elsewhere(lambda: get_lock("stock:seg-1:1", alias="local")), pytest.raises(Busy):
        order_create(sku="seg-1", quantity=1, user_id="u2")  # segment 1's lock is the one it waits for
