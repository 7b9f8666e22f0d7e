"""How a purchase's answer is labelled for /metrics (the sums over a running stack's
workers: tests/test_metrics.py)."""

import time

import pytest
from django.test import override_settings
from prometheus_client import REGISTRY

from common.metrics import timings_flush
from common.strategies import strategy_get
from orders.metrics import purchase_counted
from orders.resolve import _strategies


def counted(strategy: str, code: str) -> float:
    return REGISTRY.get_sample_value("flashsale_purchases_total", {"strategy": strategy, "code": code}) or 0.0


def test_an_answer_is_labelled_by_its_strategy_and_code_and_a_refusal_by_its_error():
    before = {k: counted(*k) for k in [("gate", "created"), ("gate", "replayed"), ("unresolved", "invalid"),
                                       ("unresolved", "http_500")]}
    purchase_counted(sku="m", body={"strategy": "gate", "order_id": 1}, status=201, arrived=None)
    purchase_counted(sku="m", body={"strategy": "gate", "order_id": 1}, status=200, arrived=None)
    purchase_counted(sku=None, body={"error": "invalid", "message": "sku: required"}, status=400,
                     arrived=None)
    purchase_counted(sku="never-resolved", body=None, status=500, arrived=None)
    assert {k: counted(*k) - v for k, v in before.items()} == {
        ("gate", "created"): 1, ("gate", "replayed"): 1,
        ("unresolved", "invalid"): 1, ("unresolved", "http_500"): 1}


def timed(strategy: str, answer: str, bucket: str) -> float:
    return REGISTRY.get_sample_value("flashsale_purchase_seconds_bucket",
                                     {"strategy": strategy, "answer": answer, "le": bucket}) or 0.0


def test_an_answer_is_timed_from_its_arrival_by_strategy_and_whether_it_was_an_order():
    timings_flush()
    before = {k: timed(*k) for k in [("setnx", "created", "0.25"), ("setnx", "created", "0.1"),
                                     ("setnx", "created", "+Inf"), ("unresolved", "refused", "+Inf")]}
    purchase_counted(sku="m", body={"strategy": "setnx"}, status=201, arrived=time.time() - 0.2)
    purchase_counted(sku="never-resolved", body={"error": "sold_out"}, status=409, arrived=time.time())
    purchase_counted(sku="m", body={"strategy": "setnx"}, status=201, arrived=None)  # not timed
    timings_flush()  # what the process's timings thread does every second
    assert {k: timed(*k) - v for k, v in before.items()} == {
        ("setnx", "created", "0.25"): 1, ("setnx", "created", "0.1"): 0, ("setnx", "created", "+Inf"): 1,
        ("unresolved", "refused", "+Inf"): 1}


def test_a_refusal_after_a_wait_longer_than_the_memory_keeps_its_strategy():
    """A purchase resolved its sale's strategy, then waited for a lock past the
    process's memory of it (``FLASHSALE_STRATEGY_MEMORY_S``), and is refused: its
    answer is counted under that strategy, not as unresolved."""
    _strategies.put("waited", strategy_get("setnx"), seconds=0.0)  # resolved, and already past
    assert _strategies.get("waited") is None
    before = counted("setnx", "busy"), counted("unresolved", "busy")
    purchase_counted(sku="waited", body={"error": "busy"}, status=503, arrived=None)
    assert (counted("setnx", "busy"), counted("unresolved", "busy")) == (before[0] + 1, before[1])


@override_settings(FLASHSALE_METRICS=False)
def test_with_metrics_off_nothing_is_counted():
    before = counted("atomic", "created"), timed("atomic", "created", "+Inf")
    purchase_counted(sku="m", body={"strategy": "atomic"}, status=201, arrived=time.time())
    timings_flush()
    assert (counted("atomic", "created"), timed("atomic", "created", "+Inf")) == before


def test_a_count_that_cannot_be_written_never_changes_the_answer(monkeypatch, caplog):
    """Counted after the purchase committed: a metrics file that cannot be written
    (its directory gone, the disk full) is logged, and the answer stands."""
    def unwritable(*labels):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("orders.metrics.PURCHASES.labels", unwritable)
    purchase_counted(sku="m", body={"strategy": "atomic"}, status=201, arrived=None)  # does not raise
    assert "not written for /metrics" in caplog.text


def sold_out_moments(strategy: str) -> float:
    return REGISTRY.get_sample_value("flashsale_sales_sold_out_total", {"strategy": strategy}) or 0.0


@pytest.mark.django_db
@override_settings(FLASHSALE_STRATEGY="atomic")
def test_a_sale_sells_out_once_however_many_purchases_find_it_so_and_again_after_a_reset():
    from common.errors import SoldOut
    from orders.purchase import order_create
    from orders.reset import sale_reset

    before = sold_out_moments("atomic")
    for _ in range(2):
        sale_reset(sku="metrics-sold-out", stock=2)
        for i in range(5):
            try:
                order_create(sku="metrics-sold-out", quantity=1, user_id=f"u{i}", idempotency_key=None)
            except SoldOut:
                pass
    assert sold_out_moments("atomic") - before == 2
