"""How a purchase's answer is labelled for /metrics (the sums over a running stack's
workers: tests/test_metrics.py)."""

from django.test import override_settings
from prometheus_client import REGISTRY

from orders.metrics import purchase_counted


def counted(strategy: str, code: str) -> float:
    return REGISTRY.get_sample_value("flashsale_purchases_total", {"strategy": strategy, "code": code}) or 0.0


def test_an_answer_is_labelled_by_its_strategy_and_code_and_a_refusal_by_its_error():
    before = {k: counted(*k) for k in [("gate", "created"), ("gate", "replayed"), ("unresolved", "invalid"),
                                       ("unresolved", "http_500")]}
    purchase_counted(sku="m", body={"strategy": "gate", "order_id": 1}, status=201)
    purchase_counted(sku="m", body={"strategy": "gate", "order_id": 1}, status=200)
    purchase_counted(sku=None, body={"error": "invalid", "message": "sku: required"}, status=400)
    purchase_counted(sku="never-resolved", body=None, status=500)
    assert {k: counted(*k) - v for k, v in before.items()} == {
        ("gate", "created"): 1, ("gate", "replayed"): 1,
        ("unresolved", "invalid"): 1, ("unresolved", "http_500"): 1}


@override_settings(FLASHSALE_METRICS=False)
def test_with_metrics_off_nothing_is_counted():
    before = counted("atomic", "created")
    purchase_counted(sku="m", body={"strategy": "atomic"}, status=201)
    assert counted("atomic", "created") == before


def test_a_count_that_cannot_be_written_never_changes_the_answer(monkeypatch, caplog):
    """Counted after the purchase committed: a metrics file that cannot be written
    (its directory gone, the disk full) is logged, and the answer stands."""
    def unwritable(*labels):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("orders.metrics.PURCHASES.labels", unwritable)
    purchase_counted(sku="m", body={"strategy": "atomic"}, status=201)  # does not raise
    assert "not counted for /metrics" in caplog.text
