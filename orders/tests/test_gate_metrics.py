"""The gate's metrics (orders.gate.backlog, orders.gate.metrics), on the real Redis and MariaDB: the
backlog the apps read at a scrape follows what waits to be written, and the
persisters count what they wrote and what they set aside."""

import time

import pytest
from prometheus_client import REGISTRY

from common.metrics import SourcesRead
from orders.gate.backlog import GateBacklogCollector, oldest_unwritten_ms
from orders.gate.store import GROUP, gate_keys, gate_redis
from orders.gate.tally import gate_tally
from orders.reset import sale_reset
from orders.tests.test_gate import buy, gate, persist  # noqa: F401 - gate: the fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("gate")]


def gauges() -> dict[str, float]:
    return {family.name: family.samples[0].value for family in GateBacklogCollector().collect()}


def intents(outcome: str) -> float:
    return REGISTRY.get_sample_value("flashsale_gate_intents_total", {"outcome": outcome}) or 0.0


def test_the_backlog_counts_what_waits_and_falls_to_0_once_written():
    sale_reset(sku="sku-1", stock=10)
    sale_reset(sku="sku-2", stock=5)
    for i in range(4):
        buy(f"k{i}", user=f"u{i}")
    buy("k9", sku="sku-2")
    read = gauges()
    waited = read.pop("flashsale_gate_oldest_unwritten_seconds")
    assert read == {"flashsale_gate_sales_listed": 2, "flashsale_gate_backlog": 5,
                    "flashsale_gate_pending": 0, "flashsale_gate_dead_letters": 0,
                    "flashsale_gate_stock_left": 10}
    assert 0 <= waited < 5
    written = intents("written")
    persist()
    assert gauges()["flashsale_gate_backlog"] == 0
    assert gauges()["flashsale_gate_oldest_unwritten_seconds"] == 0
    assert intents("written") - written == 5


def test_the_oldest_unwritten_order_ages_while_nobody_writes_it_read_or_not():
    sale_reset(sku="sku-1", stock=10)
    buy("k0", user="u0")
    time.sleep(1.2)
    buy("k1", user="u1")
    assert gauges()["flashsale_gate_oldest_unwritten_seconds"] >= 1.2  # k0's, unread
    stream = gate_keys("sku-1").stream
    # A persister read both and stopped before acknowledging them: k0's still counts.
    gate_redis().xreadgroup(GROUP, "stopped", {stream: ">"}, count=10)
    assert gauges()["flashsale_gate_pending"] == 2
    assert gauges()["flashsale_gate_oldest_unwritten_seconds"] >= 1.2
    persist()  # claims them once idle
    assert gauges()["flashsale_gate_oldest_unwritten_seconds"] == 0


def test_a_batch_acknowledged_between_the_tally_and_the_age_read_is_no_failed_scrape():
    """The tally says a persister holds entries; it acknowledges them before the age
    is read (a scrape racing a persister's commit): nothing waits, and the scrape
    reads the other gauges too instead of failing the collector."""
    sale_reset(sku="sku-1", stock=10)
    buy("k0", user="u0")
    stream = gate_keys("sku-1").stream
    [(_, [(entry, _)])] = gate_redis().xreadgroup(GROUP, "racing", {stream: ">"}, count=10)
    tally = gate_tally(sku="sku-1")
    assert tally is not None and tally.unacknowledged == 1
    gate_redis().xack(stream, GROUP, entry)  # the persister's commit, after the tally
    assert oldest_unwritten_ms(gate_redis(), "sku-1", tally) is None


def test_a_group_that_read_everything_has_nothing_undelivered_whatever_redis_lag_says():
    sale_reset(sku="sku-1", stock=10)
    for i in range(3):
        buy(f"k{i}", user=f"u{i}")
    persist()
    # Redis 7.0 can leave "lag" above 0 for a group that read every entry (its count
    # of entries read falls behind): the last id delivered says it read them all.
    stream = gate_keys("sku-1").stream
    group = gate_redis().xinfo_groups(stream)[0]
    assert group["last-delivered-id"] == gate_redis().xinfo_stream(stream)["last-generated-id"]
    assert gate_tally(sku="sku-1").undelivered == 0


def test_dead_letters_show_in_the_gauge_and_the_counter():
    sale_reset(sku="sku-1", stock=1)
    gate_redis().hset(gate_keys("sku-1").sale, mapping={"stock": 3, "loaded": 3})  # Redis believes in more
    for i in range(3):
        buy(f"k{i}", user=f"u{i}")
    dead = intents("dead_lettered")
    persist()
    assert gauges()["flashsale_gate_sales_listed"] == 0  # sold out and written: off the list
    assert gauges()["flashsale_gate_dead_letters"] == 2  # and its dead letters still count
    assert intents("dead_lettered") - dead == 2


def test_a_redis_that_cannot_be_reached_yields_no_gauge_and_the_collectors_up_says_so(monkeypatch, caplog):
    import redis

    def unreachable():
        raise redis.ConnectionError("Connection refused")

    read = SourcesRead([GateBacklogCollector()])
    assert {s.labels["collector"]: s.value for f in read.collect() if f.name == "flashsale_collector_up"
            for s in f.samples} == {"gate_backlog": 1}
    monkeypatch.setattr("orders.gate.backlog.gate_listed", unreachable)
    samples = [(family.name, sample.labels, sample.value)
               for family in read.collect() for sample in family.samples]
    assert samples == [("flashsale_collector_up", {"collector": "gate_backlog"}, 0)]
    assert "gate_backlog: not read for /metrics" in caplog.text
