"""The race runner in-process: its buyers against Django's live server (the suite's
MariaDB and Redis behind it), so that a race can be stopped or lose its lease at a
chosen moment; and its figures on fixtures. The stack's own runner process races
through nginx in ``tests/test_races.py``."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection

from locking.backends.mysql import side_connection
from orders.selectors import sale_audit
from races import services
from races.runner import RaceRun, _Lane, latency_figures, verdict
from waitingroom.services import RoomTerms

pytestmark = pytest.mark.django_db(transaction=True)


def race(live_server, **kwargs) -> tuple[dict, RaceRun]:
    spec = {"strategies": ["none", "atomic"], "stock": 10, "buyers": 40, "concurrency": 16} | kwargs
    queued = services.race_start(**spec)
    return queued, RaceRun(services.race_take(race_id=queued["id"]), target=live_server.url)


def test_a_race_ends_with_each_products_audit_and_gives_the_machine_back(live_server, settings):
    settings.FLASHSALE_SECTION_DELAY_MS = 20  # `none`'s read-modify-write overlaps for sure
    _, run = race(live_server)
    finished = run.run()
    assert (finished["status"], finished["sent"], finished["answered"]) == ("finished", 80, 80), finished
    none, atomic = finished["lanes"]
    for lane in (none, atomic):
        audit = sale_audit(sku=lane["sku"])
        figures = ("orders", "oversold", "lost_updates", "consistent", "remaining")
        assert [lane[name] for name in figures] == [getattr(audit, name) for name in figures], lane
        assert lane["orders"] + lane["sold_out"] + lane["busy"] + lane["errors"] == 40
        assert lane["series"] and lane["series"][-1][1] == lane["orders"]
        series = lane["series"]
        assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(series, series[1:], strict=False))
    assert none["verdict"] == f"oversold by {none['oversold']}" and none["oversold"] > 0, none
    assert (atomic["verdict"], atomic["orders"], atomic["sold_out"]) == ("held", 10, 30), atomic
    assert atomic["p50_ms"] <= atomic["p99_ms"] and atomic["orders_per_s"] > 0
    assert services.lease_holder() is None  # the next race may start
    assert json.loads(services.race_json(race_id=finished["id"])) == finished


def test_a_race_with_a_waiting_room_admits_every_buyer_at_its_rate_then_each_buys(live_server, settings):
    """Every buyer asks for its place at once, waits its turn and buys with its
    admission; each column shows its room's queue draining, never faster than its rate
    (it starts with a second's admissions in hand: the room opened at the reset)."""
    settings.FLASHSALE_ROOM_PLACES_PER_ADDRESS = 0  # the buyers share one address, as in the stack
    # 5 a second for 40 buyers: the rooms drain for 7 s, which the runner's ticks see
    # even when one comes late on a loaded machine.
    rate, buyers = 5, 40
    _, run = race(live_server, buyers=buyers, room=RoomTerms.given(rate=rate))
    finished = run.run()
    assert (finished["status"], finished["answered"]) == ("finished", 2 * buyers), finished
    assert finished["elapsed_s"] >= (buyers - rate) / rate
    for lane in finished["lanes"]:
        room = lane["room"]
        assert room["admitted"] == buyers and lane["errors"] == lane["busy"] == 0, lane
        assert lane["orders"] + lane["sold_out"] == buyers
        waiting = [tick[1] for tick in room["series"]]
        assert max(waiting) > 0 and waiting[-1] == 0, room["series"]
        admitted = [tick[2] for tick in room["series"]]
        assert admitted == sorted(admitted) and admitted[-1] == buyers
    atomic = finished["lanes"][1]
    assert (atomic["verdict"], atomic["orders"], atomic["sold_out"]) == ("held", 10, 30), atomic


def test_a_connection_the_database_dropped_between_races_is_replaced(live_server, caplog):
    """The runner lives from race to race: a database restart in between (here, the
    server ends its connection) costs the next race nothing, not even a stock figure."""
    _, run = race(live_server, buyers=8)
    connection.ensure_connection()
    with side_connection("default") as cursor:
        cursor.execute("KILL %s", [connection.connection.thread_id()])
    assert run.run()["status"] == "finished"
    assert "unreadable" not in caplog.text


def test_a_stopped_runner_sends_no_more_and_its_race_reads_failed(live_server, settings):
    settings.FLASHSALE_SECTION_DELAY_MS = 20
    _, run = race(live_server, buyers=2000, concurrency=4)
    threading.Timer(0.5, run.stop.set).start()
    ended = run.run()
    assert ended["status"] == "failed" and "stopped" in ended["error"], ended
    assert ended["sent"] < ended["total"]
    assert services.lease_holder() is None


def test_a_race_that_lost_its_lease_stops_its_buyers(live_server, settings):
    settings.FLASHSALE_SECTION_DELAY_MS = 20
    queued, run = race(live_server, buyers=2000, concurrency=4)
    # As if this runner had stalled past its lease and another race took the machine.
    threading.Timer(0.5, lambda: services._redis().set("race:current", queued["id"] + 1)).start()
    ended = run.run()
    assert ended["status"] == "abandoned" and "lease" in ended["error"], ended
    assert ended["sent"] < ended["total"]
    assert services.lease_holder() == queued["id"] + 1  # not ours: left alone
    # Its buyers stopped with it: no purchase of this race is on its way after it ended.
    assert not [t.name for t in threading.enumerate() if t.name.startswith("racer-")]


def test_buyers_go_round_the_products_in_turn(live_server):
    _, run = race(live_server, strategies=["none", "atomic", "setnx"], buyers=3)
    order = [run.lanes[n % 3].strategy for n in iter(run._take, None)]
    assert order == ["none", "atomic", "setnx"] * 3
    run.stop.set()


@pytest.mark.django_db(transaction=False)
def test_the_figures_of_a_lane():
    lane = _Lane("atomic", "race-atomic", 2)
    for status, error, ms, at in [(201, None, 10.0, 0.5), (201, None, 30.0, 1.0), (409, "sold_out", 5.0, 1.1),
                                  (503, "busy", 50.0, 1.2), (409, "idempotency_conflict", 1.0, 1.3)]:
        lane.heard(status, error, ms, at)
    assert (lane.orders, lane.sold_out, lane.busy, lane.errors) == (2, 1, 1, 1)
    figures = latency_figures(lane)
    assert figures["orders_per_s"] == 2.0  # 2 orders by 1.0 s, its last
    assert figures["p50_ms"] == 10.0 and 30.0 < figures["p99_ms"] <= 50.0
    assert latency_figures(_Lane("none", "race-none", 1)) == {"orders_per_s": None, "p50_ms": None,
                                                                "p99_ms": None}


@pytest.mark.django_db(transaction=False)
def test_a_verdict_says_how_a_sale_broke():
    from orders.selectors import SaleAudit

    def audit(**figures):
        base = dict(sku="s", initial_stock=10, remaining=0, orders=10, ordered_quantity=10, flow_rows=10,
                    flow_quantity=10, oversold=0, lost_updates=0, consistent=True)
        return SaleAudit(**(base | figures))

    assert verdict(audit()) == "held"
    assert verdict(audit(oversold=7, lost_updates=9, consistent=False)) == "oversold by 7"
    assert verdict(audit(lost_updates=3, consistent=False)) == "lost 3 updates"
    assert verdict(audit(consistent=False)) == "ledger inconsistent"


def test_a_failed_race_tells_the_public_what_failed_and_the_log_the_details(live_server, caplog, monkeypatch):
    _, run = race(live_server, buyers=10, concurrency=2)

    def redis_gone():
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6390. Connection refused.")

    monkeypatch.setattr(run, "_write_down", redis_gone)
    ended = run.run()
    assert ended["status"] == "failed"
    assert ended["error"] == "the runner failed (ConnectionError); the operator's log has the details"
    assert "127.0.0.1:6390" in caplog.text
