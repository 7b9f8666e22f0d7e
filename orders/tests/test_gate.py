"""The gate: Redis decides, a stream carries the order, persisters write it.

On the real Redis (the suite's database 1) and MariaDB; the persister is driven
round by round here (``Persister.step``), and run as real processes in
``test_gate_processes``.
"""

import logging
import threading
import time
from datetime import timedelta
from types import SimpleNamespace
from unittest import mock

import pytest
import redis
from django.conf import settings
from django.core.cache import cache
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from common.errors import (
    Ended,
    IdempotencyConflict,
    InvalidInput,
    LimitReached,
    NotFound,
    SoldOut,
    Unavailable,
)
from common.requestlog import request_named
from common.testing import run_at_once
from inventory.models import Stock, StockFlow
from orders.gate import persister as persister_module
from orders.gate import sell as sell_module
from orders.gate import store
from orders.gate.consumers import consumer_leave
from orders.gate.intents import Intent, intents_write
from orders.gate.lifecycle import gate_listed, gate_unlist_finished, gate_warm
from orders.gate.persister import Persister
from orders.gate.store import GROUP, gate_keys, gate_redis
from orders.models import Order
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.selectors import order_status_get, sale_audit
from orders.tests.test_apis import BAD_ORDERS, post_order

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("gate")]


@pytest.fixture
def gate():
    with override_settings(FLASHSALE_STRATEGY="gate"):
        yield


def buy(key: str | None = None, *, user: str = "u1", quantity: int = 1, sku: str = "sku-1"):
    return order_create(sku=sku, quantity=quantity, user_id=user, idempotency_key=key)


def persist() -> int:
    """Rounds of one persister until it has nothing left; how many it acknowledged."""
    persister = Persister("test", block_ms=1, claim_idle_ms=0)
    done = total = persister.step()
    while done:
        done = persister.step()
        total += done
    return total


def test_a_purchase_is_accepted_in_redis_and_confirmed_once_a_persister_writes_it():
    sale_reset(sku="sku-1", stock=5)
    result = buy("k1", quantity=2)
    assert (result.status, result.strategy, result.remaining) == ("accepted", "gate", 3)
    assert not result.replayed
    assert result.order_id % 2 == 0  # the gate's ids are even; MySQL's own are odd
    assert not Order.objects.exists() and Stock.objects.get().quantity == 5  # nothing written yet
    assert order_status_get(order_id=result.order_id).status == "accepted"
    audit = sale_audit(sku="sku-1")
    assert (audit.gate.accepted, audit.gate.redis_remaining, audit.gate.backlog) == (1, 3, 1)
    assert not audit.consistent  # an order is on its way: not yet

    assert persist() == 1
    order = Order.objects.get()
    assert (order.pk, order.quantity, order.idempotency_key) == (result.order_id, 2, "k1")
    assert order.strategy == "gate"
    assert order.accepted_at is not None and order.accepted_at <= order.created_at
    flow = StockFlow.objects.get()
    assert (flow.order_reference, flow.quantity_before, flow.quantity_after) == (str(order.pk), 5, 3)
    assert Stock.objects.get().quantity == 3
    assert order_status_get(order_id=result.order_id).status == "confirmed"
    audit = sale_audit(sku="sku-1")
    assert (audit.gate.persisted, audit.gate.backlog, audit.gate.reconciled) == (1, 0, True)
    assert audit.consistent
    assert 0 <= audit.gate.confirm_p50_ms == audit.gate.confirm_p99_ms  # one order: accepted, then written


def test_the_script_refuses_past_the_stock_and_nothing_is_taken():
    sale_reset(sku="sku-1", stock=3)
    buy("k1", quantity=2)
    with pytest.raises(SoldOut) as refused:
        buy("k2", quantity=2)
    assert refused.value.extra["remaining"] == 1
    buy("k3")  # the last unit still sells
    with pytest.raises(SoldOut):
        buy("k4")
    persist()
    audit = sale_audit(sku="sku-1")
    assert (audit.orders, audit.ordered_quantity, audit.remaining, audit.consistent) == (2, 3, 0, True)


def test_many_buyers_at_once_get_exactly_the_stock():
    sale_reset(sku="sku-1", stock=20)
    errors = run_at_once(lambda i: buy(f"k{i}", user=f"u{i}"), 40)
    assert sum(e is None for e in errors) == 20
    assert all(isinstance(e, SoldOut) for e in errors if e is not None)
    persist()
    audit = sale_audit(sku="sku-1")
    assert (audit.orders, audit.remaining, audit.oversold, audit.consistent) == (20, 0, 0, True)
    assert audit.gate.reconciled and audit.gate.accepted == 20
    assert 0 <= audit.gate.confirm_p50_ms <= audit.gate.confirm_p99_ms
    # Each unit went to one order, in the order Redis took them.
    befores = sorted(StockFlow.objects.values_list("quantity_before", flat=True))
    assert befores == list(range(1, 21))


def test_a_replay_answers_the_first_answer_before_and_after_the_order_is_written():
    sale_reset(sku="sku-1", stock=5)
    first = buy("k1", quantity=2)
    buy("k2")
    again = buy("k1", quantity=2)
    assert again.replayed and (again.order_id, again.remaining) == (first.order_id, 3)
    persist()
    again = buy("k1", quantity=2)
    assert again.replayed and again.order_id == first.order_id
    with pytest.raises(IdempotencyConflict):
        buy("k1", quantity=1)  # the same key with another body
    assert Order.objects.count() == 2 and Stock.objects.get().quantity == 2


@pytest.fixture
def scripts_run():
    """How many purchases ran the sale's script since the fixture began."""
    with mock.patch.object(sell_module, "gate_script", wraps=sell_module.gate_script) as spy:
        yield lambda: sum(1 for call in spy.call_args_list if call.args[0] is store.SELL)


def test_a_sold_out_sale_is_answered_from_memory_and_its_replays_by_the_script(scripts_run):
    sale_reset(sku="sku-1", stock=2)
    first = buy("k1", quantity=2)
    with pytest.raises(SoldOut):
        buy("k2")  # the script says so, with 0 left: this process remembers it
    ran = scripts_run()
    for key in ("k3", None, "k2"):  # new keys, no key, a key refused before
        with pytest.raises(SoldOut) as refused:
            buy(key)
        assert refused.value.extra["remaining"] == 0
    assert scripts_run() == ran  # no script: answered from memory
    again = buy("k1", quantity=2)  # the sale's own key: the script answers its replay
    assert again.replayed and (again.order_id, again.remaining) == (first.order_id, 0)
    with pytest.raises(IdempotencyConflict):
        buy("k1", quantity=1)
    assert scripts_run() == ran + 2
    persist()
    audit = sale_audit(sku="sku-1")
    assert (audit.orders, audit.remaining, audit.consistent) == (1, 0, True)


def test_a_sale_with_more_keys_than_a_process_holds_answers_keyed_purchases_by_the_script(scripts_run):
    with override_settings(FLASHSALE_GATE_SOLD_OUT_KEYS=1):
        sale_reset(sku="sku-1", stock=2)
        buy("k1")
        buy("k2")
        with pytest.raises(SoldOut):
            buy("k3")
        ran = scripts_run()
        with pytest.raises(SoldOut):
            buy("k4")  # which of the two keys... not held: the script tells
        assert scripts_run() == ran + 1
        with pytest.raises(SoldOut):
            buy(None)  # no key: no replay to miss, from memory
        assert scripts_run() == ran + 1
        assert buy("k2").replayed


def test_without_the_fast_path_every_sold_out_purchase_runs_the_script(scripts_run):
    with override_settings(FLASHSALE_SOLD_OUT_FAST_PATH=False):
        sale_reset(sku="sku-1", stock=0)
        for key in ("k1", "k2", None):
            with pytest.raises(SoldOut):
                buy(key)
        assert scripts_run() == 3


def test_a_sale_that_is_short_but_not_empty_is_not_remembered(scripts_run):
    sale_reset(sku="sku-1", stock=1)
    for key in ("k1", "k2"):
        with pytest.raises(SoldOut):
            buy(key, quantity=2)
    assert scripts_run() == 2
    assert buy("k3").remaining == 0  # the last unit still sells


def test_a_reset_answers_only_once_no_process_answers_from_the_sold_out_sale(scripts_run):
    sale_reset(sku="sku-1", stock=1)
    buy("k1")
    with pytest.raises(SoldOut):
        buy("k2")
    memory = sell_module._sold_out
    remembered, until = memory.last("sku-1"), memory.until("sku-1")  # what another process would hold too
    sale_reset(sku="sku-1", stock=5)
    assert time.monotonic() >= until
    memory.put("sku-1", remembered, since=until, seconds=0)  # that other process, after the reset
    result = buy("k2")
    assert (result.status, result.remaining) == ("accepted", 4)


def test_the_memory_of_a_sold_out_sale_ends_with_its_window(settings):
    settings.FLASHSALE_GATE_SOLD_OUT_MEMORY_S = 10.0  # longer than the window: the window's end bounds it
    ends_at = timezone.now() + timedelta(seconds=2)  # wide enough for a loaded machine
    sale_reset(sku="sku-1", stock=0, ends_at=ends_at)
    with pytest.raises(SoldOut):
        buy("k1")
    left = (ends_at - timezone.now()).total_seconds()
    assert sell_module._sold_out.until("sku-1") <= time.monotonic() + left + 0.01
    time.sleep(max(left, 0.0) + 0.05)
    with pytest.raises(Ended):
        buy("k2")


@pytest.mark.exclusive  # every client of the gate's Redis dropped, the other worker's too
def test_a_purchase_after_redis_dropped_every_connection_or_forgot_the_script_is_accepted():
    sale_reset(sku="sku-1", stock=5)
    buy("k1")  # this thread's connection to the gate's Redis is open
    with redis.Redis.from_url(settings.FLASHSALE_GATE_REDIS_URL) as other:
        other.client_kill_filter(_type="normal", skipme=True)  # as a restart of Redis drops them
    assert buy("k2").status == "accepted"  # not "outcome unknown": nothing had been sent
    gate_redis().script_flush()  # as a restart without persistence forgets the scripts
    assert buy("k3").remaining == 2
    persist()
    assert sale_audit(sku="sku-1").consistent


def test_the_per_user_limit_holds_in_the_script():
    sale_reset(sku="sku-1", stock=10)
    with override_settings(FLASHSALE_PER_USER_LIMIT=2):
        buy("k1", user="u1")
        with pytest.raises(LimitReached):
            buy("k2", user="u1", quantity=2)
        buy("k3", user="u1")
        with pytest.raises(LimitReached):
            buy("k4", user="u1")
        buy("k5", user="u2", quantity=2)
    persist()
    assert sale_audit(sku="sku-1").ordered_quantity == 4


def test_a_product_is_sold_through_the_gate_in_one_segment():
    with pytest.raises(InvalidInput):
        sale_reset(sku="sku-1", stock=10, segments=4)
    with override_settings(FLASHSALE_STOCK_SEGMENTS=4):
        sale_reset(sku="sku-1", stock=10)
    assert Stock.objects.count() == 1


def test_an_unknown_product_is_404_and_one_redis_does_not_hold_is_503():
    with pytest.raises(NotFound):
        buy("k1", sku="nope")
    with override_settings(FLASHSALE_STRATEGY="atomic"):
        sale_reset(sku="sku-1", stock=5)  # reset under another strategy: nothing in Redis
    with pytest.raises(Unavailable) as cold:
        buy("k1")
    assert cold.value.extra["backend"] == "gate"


def test_redis_out_of_reach_is_503_unavailable_and_nothing_is_taken():
    sale_reset(sku="sku-1", stock=5)
    with override_settings(FLASHSALE_GATE_REDIS_URL="redis://127.0.0.1:1/0"), pytest.raises(Unavailable) as e:
        buy("k1")
    assert e.value.extra["backend"] == "redis"
    assert sale_audit(sku="sku-1").gate.redis_remaining == 5


def test_a_reset_that_cannot_close_the_gate_sale_changes_nothing():
    sale_reset(sku="sku-1", stock=5)
    buy("k1")
    persist()
    with override_settings(FLASHSALE_GATE_REDIS_URL="redis://127.0.0.1:1/0"):
        for strategy in ("gate", "atomic"):  # the product has a gate sale: either must close it
            with override_settings(FLASHSALE_STRATEGY=strategy), pytest.raises(Unavailable):
                sale_reset(sku="sku-1", stock=50)
    assert (Order.objects.count(), Stock.objects.get().quantity) == (1, 4)
    assert buy("k2").remaining == 3  # still the same sale
    with override_settings(FLASHSALE_STRATEGY="atomic"):
        sale_reset(sku="sku-2", stock=5)  # no gate sale: Redis out of reach is no obstacle
        with override_settings(FLASHSALE_GATE_REDIS_URL="redis://127.0.0.1:1/0"):
            sale_reset(sku="sku-2", stock=5)


def test_an_intent_the_database_refuses_is_dead_lettered_and_does_not_block_the_rest():
    sale_reset(sku="sku-1", stock=3)
    # Redis believes in more stock than MySQL has (what a Redis that lost writes does).
    gate_redis().hset(gate_keys("sku-1").sale, mapping={"stock": 5, "loaded": 5})
    results = [buy(f"k{i}", user=f"u{i}") for i in range(5)]
    persist()
    audit = sale_audit(sku="sku-1")
    assert (audit.orders, audit.remaining, audit.oversold) == (3, 0, 0)
    assert (audit.gate.dead_lettered, audit.gate.backlog, audit.gate.reconciled) == (2, 0, False)
    assert not audit.consistent
    statuses = [order_status_get(order_id=r.order_id).status for r in results]
    assert sorted(statuses) == ["confirmed"] * 3 + ["dead_lettered"] * 2
    dead = gate_redis().xrange(gate_keys("sku-1").dead)
    assert all("SoldOut" in fields["reason"] for _, fields in dead)
    persist()  # dead-lettered once, however often it is read
    assert sale_audit(sku="sku-1").gate.dead_lettered == 2


def test_each_order_written_or_dead_lettered_is_a_line_named_for_its_request(caplog):
    """The request's name rides in the stream entry: the persister's line for each
    order names it, and the written order's row keeps it."""
    sale_reset(sku="sku-1", stock=2)
    gate_redis().hset(gate_keys("sku-1").sale, mapping={"stock": 3, "loaded": 3})  # one more than MySQL has
    bought = []
    for i in range(3):
        request_named(SimpleNamespace(META={"HTTP_X_REQUEST_ID": f"req-{i}"}))
        bought.append(buy(f"k{i}", user=f"u{i}").order_id)
    entries = gate_redis().xrange(gate_keys("sku-1").stream)
    assert [fields["request"] for _, fields in entries] == ["req-0", "req-1", "req-2"]
    with caplog.at_level(logging.INFO, logger="orders.gate.persister"):
        persist()
    lines = {r.request_id: (r.levelname, r.getMessage()) for r in caplog.records
             if r.name == "orders.gate.persister" and "order" in r.getMessage()}
    assert lines.keys() == {"req-0", "req-1", "req-2"}
    assert [lines[f"req-{i}"][0] for i in range(3)] == ["INFO", "INFO", "ERROR"]
    assert all(f"order {order_id} of sku-1" in lines[f"req-{i}"][1] for i, order_id in enumerate(bought))
    assert dict(Order.objects.values_list("pk", "request_id")) == {bought[0]: "req-0", bought[1]: "req-1"}


def test_an_entry_older_than_the_request_field_is_still_written():
    fields = {"order": "2", "key": "k", "user": "u", "quantity": "1", "before": "5", "after": "4",
              "instance": "app1"}
    assert Intent.parse("1-0", fields).request == ""


def test_a_batch_written_but_not_acknowledged_is_written_once_when_read_again():
    sale_reset(sku="sku-1", stock=10)
    for i in range(4):
        buy(f"k{i}", user=f"u{i}")
    client, keys = gate_redis(), gate_keys("sku-1")
    # A persister reads the batch and commits it, and dies before its XACK.
    [(_, entries)] = client.xreadgroup(GROUP, "died", {keys.stream: ">"}, count=10)
    intents = [Intent.parse(entry_id, fields) for entry_id, fields in entries]
    assert len(intents_write(intents).written) == 4
    assert persist() == 4  # claimed from the dead consumer (idle 0 ms here), found written
    assert client.xpending(keys.stream, GROUP)["pending"] == 0
    audit = sale_audit(sku="sku-1")
    assert (audit.orders, audit.flow_rows, audit.remaining, audit.consistent) == (4, 4, 6, True)


def test_a_reset_drops_the_old_sales_backlog():
    sale_reset(sku="sku-1", stock=10)
    buy("k1")
    client, keys = gate_redis(), gate_keys("sku-1")
    [(_, entries)] = client.xreadgroup(GROUP, "slow", {keys.stream: ">"}, count=10)
    sale_reset(sku="sku-1", stock=10)
    # The slow persister's batch, from the sale before the reset, writes nothing.
    outcome = intents_write([Intent.parse(entry_id, fields) for entry_id, fields in entries])
    assert (len(outcome.written), len(outcome.closed)) == (0, 1)
    buy("k1")
    persist()
    audit = sale_audit(sku="sku-1")
    assert (audit.orders, audit.remaining, audit.consistent) == (1, 9, True)


def test_one_claim_pass_takes_every_sales_entries_a_dead_consumer_left_past_a_batch_each():
    """The pass asks every listed sale at once and scans on where a sale has more
    pending than a batch: none is left for a later pass."""
    for sku in ("sku-1", "sku-2"):
        sale_reset(sku=sku, stock=10)
        for i in range(5):
            buy(f"{sku}-k{i}", user=f"u{i}", sku=sku)
    client = gate_redis()
    for sku in ("sku-1", "sku-2"):
        [(_, entries)] = client.xreadgroup(GROUP, "died", {gate_keys(sku).stream: ">"}, count=10)
        assert len(entries) == 5
    persister = Persister("test", batch=2, block_ms=1, claim_idle_ms=0)
    assert persister.step() == 10
    assert all(client.xpending(gate_keys(sku).stream, GROUP)["pending"] == 0 for sku in ("sku-1", "sku-2"))
    assert Order.objects.count() == 10


def test_a_finished_sale_leaves_the_persisters_list_once_its_orders_are_written():
    """Sold out and written: off the list, so the persisters' rounds cost the live
    sales only. Its keys stay (audit, replays); a reset lists the next sale."""
    sale_reset(sku="sku-1", stock=2)
    sale_reset(sku="sku-2", stock=5)
    buy("k1", user="u1")
    buy("k2", user="u2")  # sku-1 sold out
    buy("k3", sku="sku-2")
    assert gate_listed() == ["sku-1", "sku-2"]
    assert gate_unlist_finished(["sku-1", "sku-2"]) == []  # not delivered yet; still selling
    client, keys = gate_redis(), gate_keys("sku-1")
    [(_, entries)] = client.xreadgroup(GROUP, "slow", {keys.stream: ">"}, count=10)
    assert len(entries) == 2
    assert gate_unlist_finished(["sku-1"]) == []  # delivered, not acknowledged
    assert gate_listed() == ["sku-1", "sku-2"]
    persist()  # claims the slow one's entries, writes them, and takes the sale off
    assert gate_listed() == ["sku-2"]  # still selling
    audit = sale_audit(sku="sku-1")
    assert (audit.orders, audit.gate.backlog, audit.consistent) == (2, 0, True)
    assert buy("k1", user="u1").replayed
    with pytest.raises(SoldOut):
        buy("k9", user="u9")
    sale_reset(sku="sku-1", stock=1)
    assert gate_listed() == ["sku-1", "sku-2"]
    buy("k1", user="u1")
    persist()
    assert Order.objects.filter(product__sku="sku-1").count() == 1


def test_a_sale_past_its_end_leaves_the_list_with_stock_left():
    # Wide enough for the reset and the purchase on a loaded machine; then the test
    # waits for the end as it was written, not for a fixed while.
    ends_at = timezone.now() + timedelta(seconds=2)
    sale_reset(sku="sku-1", stock=5, ends_at=ends_at)
    buy("k1")
    persist()
    assert gate_listed() == ["sku-1"]  # open: more may come
    time.sleep(max((ends_at - timezone.now()).total_seconds(), 0.0) + 0.05)
    persist()
    assert gate_listed() == []
    assert Order.objects.count() == 1


def test_a_sale_found_finished_stays_listed_if_a_reset_opened_the_next_one_meanwhile():
    sale_reset(sku="sku-1", stock=0)
    keys = gate_keys("sku-1")
    finished = store.gate_script(store.FINISHED)(keys=[keys.sale, keys.stream], args=[GROUP])
    assert finished is not None
    sale_reset(sku="sku-1", stock=5)  # a new sale, listed
    assert store.gate_script(store.UNLIST)(keys=[store.SALES], args=["sku-1", finished]) == 0
    assert gate_listed() == ["sku-1"]
    buy("k1")
    persist()
    assert Order.objects.count() == 1


def test_a_sale_whose_keys_redis_lost_does_not_stop_the_others_being_written():
    """Listed, but its keys gone (an AOF that lost a reset's last second: closed, not
    opened again): the others' orders are still written, and it leaves the list
    until a warm-up lists it again."""
    sale_reset(sku="sku-1", stock=5)
    sale_reset(sku="sku-2", stock=5)
    buy("k1", sku="sku-2")
    gate_redis().delete(*gate_keys("sku-1"))
    assert persist() == 1
    assert Order.objects.filter(product__sku="sku-2").count() == 1
    assert gate_listed() == ["sku-2"]
    gate_warm(sku="sku-1")
    assert gate_listed() == ["sku-1", "sku-2"]
    buy("k2", user="u2")
    assert persist() == 1
    assert Order.objects.filter(product__sku="sku-1").count() == 1


def test_a_listed_sale_whose_stream_alone_is_gone_is_skipped_by_each_round():
    sale_reset(sku="sku-1", stock=5)
    sale_reset(sku="sku-2", stock=5)
    buy("k1", sku="sku-2")
    gate_redis().delete(gate_keys("sku-1").stream)
    assert persist() == 1
    assert Order.objects.filter(product__sku="sku-2").count() == 1
    assert gate_listed() == ["sku-1", "sku-2"]  # its sale is there: not taken off


def test_a_persister_moves_the_sales_of_the_lists_earlier_form_onto_the_list():
    """A stack upgraded with sales open: they were on a set of skus, which the new
    persisters do not read. The first to start moves the open ones over."""
    sale_reset(sku="sku-1", stock=5)
    client = gate_redis()
    client.hdel(store.SALES, "sku-1")
    client.sadd("gate:skus", "sku-1", "sku-gone")  # sku-gone: Redis holds no sale of it
    buy("k1")
    assert gate_listed() == []
    assert persist() == 1
    assert gate_listed() == ["sku-1"] and not client.exists("gate:skus")
    assert Order.objects.count() == 1


def test_a_warm_up_after_redis_lost_the_sale_sells_what_mysql_has_left_and_replays_its_orders():
    sale_reset(sku="sku-1", stock=5)
    first = buy("k1", quantity=2)
    persist()
    gate_redis().flushdb()  # a restart without persistence
    with pytest.raises(Unavailable):
        buy("k2")
    sale = gate_warm(sku="sku-1")
    assert sale.loaded_stock == 3
    again = buy("k1", quantity=2)
    assert again.replayed and (again.order_id, again.remaining) == (first.order_id, 3)
    buy("k2", quantity=3)
    with pytest.raises(SoldOut):
        buy("k3")
    persist()
    audit = sale_audit(sku="sku-1")
    assert (audit.orders, audit.remaining, audit.consistent) == (2, 0, True)
    with pytest.raises(InvalidInput):
        gate_warm(sku="sku-1")  # Redis holds the sale: a second warm-up would sell it twice


def test_when_redis_lost_the_sale_the_audit_says_how_many_units_no_store_accounts_for():
    sale_reset(sku="sku-1", stock=5)
    buy("k1", quantity=2)
    persist()
    buy("k2")  # accepted, not yet written
    gate_redis().flushdb()  # the gate's own database flushed: the sale and its stream are gone
    audit = sale_audit(sku="sku-1")
    assert (audit.orders, audit.remaining, audit.consistent) == (1, 3, False)
    assert (audit.gate.redis_lost, audit.gate.unknown_units, audit.gate.loaded) == (True, 3, 5)
    assert audit.gate.redis_remaining is None and audit.gate.backlog is None
    body = APIClient().get("/api/products/sku-1/audit", HTTP_AUTHORIZATION="Token test-admin-token").json()
    assert body["consistent"] is False and body["gate"]["unknown_units"] == 3


def test_a_flush_of_djangos_cache_leaves_the_gates_accepted_orders():
    sale_reset(sku="sku-1", stock=5)
    accepted = [buy(f"k{i}", user=f"u{i}").order_id for i in range(3)]
    cache.clear()  # the cache's database: the gate's Redis is another
    assert persist() == 3
    assert sorted(Order.objects.values_list("pk", flat=True)) == sorted(accepted)
    assert sale_audit(sku="sku-1").consistent


def test_the_api_answers_accepted_then_the_order_can_be_followed():
    sale_reset(sku="sku-1", stock=5)
    api = APIClient()
    response = api.post("/api/orders", {"sku": "sku-1", "quantity": 1, "user_id": "u1"}, format="json",
                        HTTP_IDEMPOTENCY_KEY="k1")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["status"], body["strategy"], body["remaining"]) == ("accepted", "gate", 4)
    assert "hold;dur=" in response.headers["Server-Timing"]
    follow = api.get(f"/api/orders/{body['order_id']}")
    assert follow.status_code == 200 and follow.json()["status"] == "accepted"
    persist()
    assert api.get(f"/api/orders/{body['order_id']}").json()["status"] == "confirmed"
    for missing in (body["order_id"] + 2, body["order_id"] + 1, 2**62):
        response = api.get(f"/api/orders/{missing}")
        assert response.status_code == 404 and response.json()["error"] == "not_found"
    audit = api.get("/api/products/sku-1/audit", HTTP_AUTHORIZATION="Token test-admin-token").json()
    assert audit["gate"]["reconciled"] and audit["consistent"]


@pytest.mark.parametrize("case", BAD_ORDERS.values(), ids=BAD_ORDERS.keys())
def test_bad_input_is_400_and_takes_nothing_from_redis(case):
    sale_reset(sku="sku-1", stock=10)
    response = post_order(APIClient(), **case)
    assert response.status_code == 400 and response.json()["error"] == "invalid", response.content
    audit = sale_audit(sku="sku-1")
    assert (audit.gate.redis_remaining, audit.gate.accepted, audit.orders) == (10, 0, 0)


def test_a_persister_stops_when_told():
    stop = threading.Event()
    persister = Persister("test", block_ms=50, stop=stop)
    thread = threading.Thread(target=persister.run)
    thread.start()
    stop.set()
    thread.join(5)
    assert not thread.is_alive()


def test_a_running_persister_touches_its_alive_file_at_every_round(tmp_path):
    alive = tmp_path / "alive"
    stop = threading.Event()
    persister = Persister("test", block_ms=20, stop=stop, alive=alive)
    thread = threading.Thread(target=persister.run)
    thread.start()
    try:
        deadline = time.monotonic() + 5
        while not alive.exists():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        first = alive.stat().st_mtime_ns
        while alive.stat().st_mtime_ns == first:  # the loop goes round: it is touched again
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join(5)


def test_a_persister_leaves_the_groups_where_it_holds_nothing_and_stays_where_it_does():
    sale_reset(sku="sku-1", stock=5)
    sale_reset(sku="sku-2", stock=5)
    buy("k1")
    buy("k2", sku="sku-2")
    persister = Persister("leaving", block_ms=1)
    persister.step()  # both written and acknowledged: it holds nothing
    client = gate_redis()
    holding = gate_keys("sku-2").stream
    buy("k3", sku="sku-2")
    client.xreadgroup(GROUP, "leaving", {holding: ">"}, count=1)  # read as it stopped: held, unwritten
    assert consumer_leave(client, "leaving") == (1, 1)
    consumers = {stream: {c["name"] for c in client.xinfo_consumers(stream, GROUP)}
                 for stream in (gate_keys("sku-1").stream, holding)}
    assert "leaving" not in consumers[gate_keys("sku-1").stream]
    assert "leaving" in consumers[holding]  # its entry is claimed by another, not dropped
    assert persist() == 1 and Order.objects.count() == 3


class _Waits(threading.Event):
    """A persister's stop event that records each wait ``run`` makes, and waits none."""

    def __init__(self):
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        return self.is_set()


def test_a_persister_lingers_after_a_round_short_of_a_batch_and_not_after_a_full_one():
    sale_reset(sku="sku-1", stock=10)
    for n in range(3):
        buy(f"k{n}", user=f"u{n}")
    stop = _Waits()
    persister = Persister("test", batch=2, block_ms=1, linger_ms=250, stop=stop)
    rounds, step = [], persister.step

    def counted() -> int:
        rounds.append(step())
        if rounds[-1] == 0:
            stop.set()  # the stream is empty: the run ends
        return rounds[-1]

    persister.step = counted
    persister.run()
    assert rounds == [2, 1, 0]  # a full batch, then the one left, then nothing
    assert stop.waits == [0.25]  # after the short round only: none after the full one or the empty one
    assert Order.objects.count() == 3


def test_an_idle_persister_waits_twice_as_long_each_empty_round_up_to_its_idle_wait():
    assert gate_listed() == []
    stop = _Waits()
    persister = Persister("test", block_ms=100, idle_ms=1000, stop=stop)
    for _ in range(6):
        assert persister.step() == 0  # nothing listed: the round waits on its stop event
    assert stop.waits == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_with_a_sale_listed_the_wait_grows_to_its_idle_wait_and_goes_back_once_it_finds_one(monkeypatch):
    sale_reset(sku="sku-1", stock=10)
    persister = Persister("test", block_ms=50, idle_ms=1000)
    blocks: list[int] = []  # each blocking XREADGROUP's wait, as Redis is asked it
    read = persister._read_group

    def spied(streams, block_ms=None):
        if block_ms is not None:
            blocks.append(block_ms)
        return read(streams, block_ms=block_ms)

    monkeypatch.setattr(persister, "_read_group", spied)
    for _ in range(4):
        assert persister.step() == 0
    buy("k1")
    assert persister.step() == 1  # its wait ends as the entry comes
    assert persister.step() == 0
    assert blocks == [50, 100, 200, 400, 800, 50]  # the entry ended the 800 ms wait


def test_on_a_cluster_a_listed_sales_wait_stops_at_the_failover_read():
    """A cluster's persister polls its streams, and a failover breaks none of its waits."""
    persister = Persister("test", block_ms=50, idle_ms=1000)
    persister._found_nothing = 5
    assert persister.wait_ms(listed=True) == 1000
    with override_settings(FLASHSALE_GATE_REDIS_CLUSTER=True):
        assert persister.wait_ms(listed=True) == 200  # FAILOVERS_READ_EVERY: 0.2 s
        assert persister.wait_ms(listed=False) == 1000


def test_after_an_error_of_redis_the_next_round_looks_for_failovers_at_once(monkeypatch):
    """A failover breaks the connection a persister waits on (or unblocks it with an
    error): the round after looks for failed-over sales without waiting out
    FAILOVERS_READ_EVERY."""
    sale_reset(sku="sku-1", stock=10)
    looked: list[list[str]] = []
    monkeypatch.setattr(persister_module, "gate_failed_over", lambda skus: looked.append(skus) or [])
    stop = _Waits()
    persister = Persister("test", block_ms=1, idle_ms=1000, stop=stop)
    rounds, step = [], persister.step

    def failing() -> int:
        rounds.append(len(looked))
        if len(rounds) == 2:
            raise redis.ConnectionError("the server went away")
        if len(rounds) == 4:
            stop.set()
        return step()

    persister.step = failing
    persister.run()
    # Rounds 1 and 3 look; 4, within FAILOVERS_READ_EVERY of 3, does not.
    assert rounds == [0, 1, 1, 2] and looked == [["sku-1"], ["sku-1"]]
    assert stop.waits[0] == 0.5  # after the error


def test_a_sale_that_opens_ends_the_wait_of_a_persister_blocked_on_the_others(monkeypatch):
    """An idle persister waits up to a second on the listed sales' streams; a sale
    listed meanwhile ends that wait, and the next round reads its stream too."""
    sale_reset(sku="sku-1", stock=10)
    persister = Persister("test", block_ms=1900, idle_ms=1900)  # under the client's 2 s timeout
    read, calls, hold = persister._read_group, [], threading.Event()

    def spied(streams, block_ms=None):
        if block_ms is not None:
            calls.append(sorted(streams))
            if len(calls) == 2:
                hold.wait(10)  # the second round's wait starts once the test has looked
        return read(streams, block_ms=block_ms)

    monkeypatch.setattr(persister, "_read_group", spied)
    rounds = threading.Thread(target=lambda: [persister.step() for _ in range(2)])
    rounds.start()
    client = gate_redis()
    db = str(client.get_connection_kwargs()["db"])  # a stack's persisters wait on theirs

    def blocked() -> list[dict]:
        return [c for c in client.client_list()
                if c["cmd"] == "xreadgroup" and "b" in c["flags"] and c["db"] == db]

    deadline = time.monotonic() + 10
    while not blocked() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert blocked(), "the persister never waited"
    sale_reset(sku="sku-2", stock=10)
    try:
        # Redis ended the wait as the reset returned: 1.9 s would not be over yet.
        assert blocked() == []
    finally:
        hold.set()
        rounds.join(10)
    assert calls == [[gate_keys("sku-1").stream], [gate_keys("sku-1").stream, gate_keys("sku-2").stream]]


@pytest.mark.exclusive  # the gate's Redis near its maxmemory refuses the other worker's writes
def test_a_persister_raises_the_alarm_when_the_gates_redis_nears_its_maxmemory(caplog):
    persister = Persister("test")
    client = gate_redis()
    before = client.config_get("maxmemory")["maxmemory"]
    assert int(before) > 0  # the stack gives the gate's Redis a limit (noeviction)
    assert persister.memory_check() < 0.8 and "full" not in caplog.text
    used = client.info("memory")["used_memory"]
    client.config_set("maxmemory", int(used / 0.9))
    try:
        assert persister.memory_check() >= 0.8
    finally:
        client.config_set("maxmemory", before)
    assert "the gate's Redis is" in caplog.text and "refuses purchases" in caplog.text
    assert client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
