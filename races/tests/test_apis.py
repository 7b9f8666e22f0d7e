"""The race API in-process, on the real MariaDB and Redis: who may start a race, its
bounds, one at a time, and what a race reads before its runner takes it. The runner
itself: ``test_runner.py`` here, and through the stack in ``tests/test_races.py``."""

from __future__ import annotations

import time

import pytest
from rest_framework.test import APIClient

from common.strategies import STRATEGIES
from inventory.models import Product
from races import services
from races.limits import MAX_BUYERS, MAX_CONCURRENCY
from waitingroom.models import Room

pytestmark = pytest.mark.django_db

RACE = {"strategies": ["none", "atomic"], "stock": 50, "buyers": 400, "concurrency": 64}


@pytest.fixture
def admin():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token test-admin-token")  # settings.test's
    return client


def start(client, body=None):
    return client.post("/api/admin/races", RACE if body is None else body, format="json")


def test_a_race_resets_one_product_per_strategy_and_waits_for_its_runner(admin, caplog):
    with caplog.at_level("INFO", logger="orders.auth"):
        response = start(admin)
    assert response.status_code == 201, response.content
    race = response.json()
    assert [r.getMessage() for r in caplog.records if r.name == "orders.auth"] == [
        f"admin race id={race['id']} strategies=['none', 'atomic'] stock=50 buyers=400 concurrency=64"
        " room=None by admin-token from 127.0.0.1"]
    assert response["Location"] == f"/api/races/{race['id']}"
    assert (race["status"], race["total"], race["sent"]) == ("queued", 800, 0)
    assert [(lane["strategy"], lane["sku"], lane["remaining"]) for lane in race["lanes"]] == [
        ("none", "race-none", 50), ("atomic", "race-atomic", 50)]
    assert {p.sku: p.strategy for p in Product.objects.all()} == {"race-none": "none",
                                                                  "race-atomic": "atomic"}
    # Queued for the runner, and readable by anyone.
    assert services._redis().lrange(services.QUEUE, 0, -1) == [str(race["id"]).encode()]
    assert APIClient().get(f"/api/races/{race['id']}").json() == race


def test_one_race_at_a_time_the_second_hears_which_runs(admin):
    first = start(admin).json()
    second = start(admin, {**RACE, "strategies": ["setnx"]})
    assert second.status_code == 409, second.content
    assert (second.json()["error"], second.json()["race_id"]) == ("race_running", first["id"])
    assert not Product.objects.filter(sku="race-setnx").exists()  # refused before any reset


def test_a_race_whose_lease_lapsed_reads_abandoned_and_frees_the_machine(admin, monkeypatch):
    monkeypatch.setattr(services, "LEASE_S", 0.2)  # no runner here takes it
    first = start(admin).json()
    time.sleep(0.3)
    assert APIClient().get(f"/api/races/{first['id']}").json()["status"] == "abandoned"
    assert services.race_take(race_id=first["id"]) is None  # a runner that comes late leaves it
    second = start(admin)
    assert second.status_code == 201, second.content
    # Only the newest race is kept.
    assert APIClient().get(f"/api/races/{first['id']}").status_code == 404


class EndsAfterItsFirstRead:
    """The race's Redis, but its runner ends the race (``race_end``, as it does: the
    last state written, then the lease given back) right after a reader's first read
    of the race's key, before that reader's next command."""

    def __init__(self, client, race: dict):
        self.client, self.race, self.ended = client, race, False

    def __getattr__(self, name: str):
        command = getattr(self.client, name)
        if name not in ("get", "mget"):
            return command

        def read(*args, **kwargs):
            reply = command(*args, **kwargs)
            if not self.ended and services._key(self.race["id"]) in repr(args):
                self.ended = True
                services.race_end(dict(self.race), status="finished")
            return reply
        return read


def test_a_race_read_as_its_runner_ends_it_reads_as_before_or_after_never_abandoned(admin, monkeypatch):
    race = start(admin).json()
    ending = EndsAfterItsFirstRead(services._redis(), race)
    monkeypatch.setattr(services, "_redis", lambda: ending)
    read = APIClient().get(f"/api/races/{race['id']}").json()
    assert ending.ended and read["status"] == "queued", read  # read whole, before the end
    assert APIClient().get(f"/api/races/{race['id']}").json()["status"] == "finished"
    assert services.lease_holder() is None


def test_the_same_strategy_twice_races_once(admin):
    race = start(admin, {**RACE, "strategies": ["atomic", "none", "atomic"]}).json()
    assert race["strategies"] == ["atomic", "none"] and race["total"] == 2 * RACE["buyers"]


@pytest.mark.parametrize("body, field", [
    ({**RACE, "strategies": ["mutex"]}, "strategies"),
    ({**RACE, "strategies": []}, "strategies"),
    ({**RACE, "buyers": MAX_BUYERS + 1}, "buyers"),
    ({**RACE, "buyers": 0}, "buyers"),
    ({**RACE, "concurrency": MAX_CONCURRENCY + 1}, "concurrency"),
    ({**RACE, "stock": 0}, "stock"),
    ({**RACE, "target": "http://example.com"}, "target"),  # the buyers go to this stack's nginx only
    ({**RACE, "room_rate": 0}, "room_rate"),
    ({**RACE, "room_active": 10}, "room_rate"),  # a room's bound, and no room
])
def test_out_of_bounds_is_400_and_nothing_is_reset_or_queued(admin, body, field):
    response = start(admin, body)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid" and field in response.json()["fields"]
    assert not Product.objects.exists()
    assert services._redis().llen(services.QUEUE) == 0


def test_a_race_with_a_waiting_room_puts_every_sale_behind_one(admin, settings):
    settings.FLASHSALE_ROOM_PLACES_PER_ADDRESS = 0  # the runner's buyers share one address
    race = start(admin, {**RACE, "room_rate": 20}).json()
    assert race["room"] == {"rate": 20, "active": 200, "admission_s": 60}  # ten seconds' admissions
    assert [lane["room"] for lane in race["lanes"]] == [
        {"waiting": 0, "admitted": 0, "admitted_per_s": None, "series": []}] * 2
    assert sorted(Room.objects.values_list("product__sku", "rate", "active")) == [
        ("race-atomic", 20, 200), ("race-none", 20, 200)]


def test_a_room_whose_bound_of_places_an_address_the_buyers_would_meet_is_refused(admin, settings):
    settings.FLASHSALE_ROOM_PLACES_PER_ADDRESS = RACE["buyers"] - 1
    response = start(admin, {**RACE, "room_rate": 20})
    assert response.status_code == 400, response.content
    assert "FLASHSALE_ROOM_PLACES_PER_ADDRESS" in response.json()["fields"]["room_rate"][0]
    assert not Product.objects.exists() and services.lease_holder() is None
    settings.FLASHSALE_ROOM_PLACES_PER_ADDRESS = RACE["buyers"]  # as many places as buyers: enough
    assert start(admin, {**RACE, "room_rate": 20}).status_code == 201


def test_a_race_without_a_room_takes_the_room_its_products_had_away(admin, settings):
    settings.FLASHSALE_ROOM_PLACES_PER_ADDRESS = 0
    first = start(admin, {**RACE, "room_rate": 20, "room_active": 5}).json()
    services.race_end(first, status="finished")
    race = start(admin).json()
    assert race["room"] is None and [lane["room"] for lane in race["lanes"]] == [None, None]
    assert not Room.objects.exists()


def test_an_unknown_strategy_is_refused_with_the_known_ones(admin):
    message = str(start(admin, {**RACE, "strategies": ["none", "mutex"]}).json()["fields"])
    assert "mutex" in message and all(name in message for name in STRATEGIES)


def test_only_the_admin_starts_a_race():
    assert start(APIClient()).status_code == 401
    wrong = APIClient()
    wrong.credentials(HTTP_AUTHORIZATION="Token nope")
    assert start(wrong).status_code == 401
    assert services._redis().llen(services.QUEUE) == 0


def test_an_unknown_race_is_a_json_404():
    response = APIClient().get("/api/races/12345")
    assert response.status_code == 404 and response.json()["error"] == "not_found"
