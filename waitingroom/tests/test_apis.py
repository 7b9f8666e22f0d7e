"""The waiting room's API on the real servers: a buyer's ask answered with its place
(the buyer its credentials name, or, without buyer sign-in, the one the body names),
bad input 400, no room 404, and a reset's room settings checked."""

import pytest
from rest_framework.test import APIClient

from buyers.tokens import token_issue
from stack.scratch import free_port
from waitingroom.models import Room

pytestmark = pytest.mark.django_db


def buyer(name: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_issue(username=name).token}")
    return client


@pytest.fixture
def room(admin_api) -> str:
    reset = admin_api.post("/api/admin/products/r-api/reset", {"stock": 5, "room_rate": 1}, format="json")
    assert reset.status_code == 200, reset.json()
    return "/api/products/r-api/room"


def test_a_buyer_asks_and_asks_again_for_the_same_place(room):
    first = buyer("ann").post(room, {}, format="json")
    assert first.status_code == 200, first.json()
    assert first.json() == {"state": "waiting", "position": 1, "ahead": 0, "wait_s": 0, "admission": None,
                            "admission_expires_at": None, "ask_again_s": 2.0}
    assert buyer("bob").post(room, {}, format="json").json()["position"] == 2
    assert buyer("ann").post(room, format="json").json()["position"] == 1


def test_without_buyer_sign_in_the_body_names_the_buyer(room, settings):
    settings.FLASHSALE_BUYER_AUTH = False
    assert APIClient().post(room, {"user_id": "ann"}, format="json").json()["position"] == 1
    refused = APIClient().post(room, {}, format="json")
    assert refused.status_code == 400 and "user_id" in refused.json()["fields"]


@pytest.mark.parametrize("body", [{"user_id": "ann"}, {"extra": 1}, [], "x"])
def test_a_bad_ask_is_refused_and_takes_no_place(room, body):
    response = buyer("bob").post(room, body, format="json")
    assert response.status_code == 400 and response.json()["error"] == "invalid"
    assert buyer("ann").post(room, {}, format="json").json()["position"] == 1


def test_an_ask_needs_a_buyer(room):
    response = APIClient().post(room, {}, format="json")
    assert response.status_code == 401 and response.json()["error"] == "not_authenticated"


def test_a_sale_without_a_room_has_no_places(admin_api):
    admin_api.post("/api/admin/products/r-none/reset", {"stock": 5}, format="json")
    for sku in ("r-none", "r-unknown"):
        response = buyer("ann").post(f"/api/products/{sku}/room", {}, format="json")
        assert response.status_code == 404 and response.json()["error"] == "not_found"


@pytest.mark.parametrize("body", [{"stock": 5, "room_active": 3}, {"stock": 5, "room_rate": 0},
                                  {"stock": 5, "room_rate": 1, "room_admission_s": 0},
                                  {"stock": 5, "room_order": "shuffled"},
                                  {"stock": 5, "room_rate": 1, "room_order": "random"}])
def test_a_reset_refuses_a_room_without_its_rate_or_with_nonsense(admin_api, body):
    response = admin_api.post("/api/admin/products/r-bad/reset", body, format="json")
    assert response.status_code == 400, response.json()


def test_a_reset_sets_its_rooms_terms_with_their_defaults(admin_api):
    def terms(body: dict) -> tuple:
        response = admin_api.post("/api/admin/products/r-terms/reset", {"stock": 5, **body}, format="json")
        assert response.status_code == 200, response.json()
        room = Room.objects.get(product__sku="r-terms")
        return room.rate, room.active, room.admission_s, room.admit_order

    assert terms({"room_rate": 7}) == (7, 70, 60, "fifo")
    assert terms({"room_rate": 7, "room_active": 3, "room_admission_s": 9, "room_order": "shuffled"}) == \
        (7, 3, 9, "shuffled")
    admin_api.post("/api/admin/products/r-terms/reset", {"stock": 5}, format="json")
    assert not Room.objects.filter(product__sku="r-terms").exists()


def test_an_ask_while_the_rooms_redis_is_away_is_503_unavailable(room, settings):
    settings.FLASHSALE_GATE_REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    response = buyer("ann").post(room, {}, format="json")
    assert response.status_code == 503, response.content
    assert (response.json()["error"], response.json()["backend"]) == ("unavailable", "redis")


def test_places_per_address_count_an_ipv6_64_as_one_address(admin_api, settings):
    settings.FLASHSALE_ROOM_PLACES_PER_ADDRESS = 2  # a room's bound is set as it opens
    reset = admin_api.post("/api/admin/products/r-api/reset", {"stock": 5, "room_rate": 1}, format="json")
    assert reset.status_code == 200, reset.json()

    def ask(name: str, address: str) -> int:
        client = buyer(name)
        client.defaults["REMOTE_ADDR"] = address
        return client.post("/api/products/r-api/room", {}, format="json").status_code

    same_64 = [ask(f"bot-{n}", f"2001:db8:5:6::{n}") for n in range(1, 4)]
    assert (same_64, ask("bot-4", "2001:db8:5:7::1")) == ([200, 200, 409], 200)


def test_a_room_that_asks_for_work_takes_a_place_with_a_solution_and_asks_again_without(admin_api):
    from common.challenges import challenge_solve

    reset = admin_api.post("/api/admin/products/r-work/reset",
                           {"stock": 5, "room_rate": 1, "room_challenge_bits": 8}, format="json")
    assert reset.status_code == 200, reset.json()
    room = "/api/products/r-work/room"
    refused = buyer("ann").post(room, {}, format="json")
    assert (refused.status_code, refused.json()["error"], refused.json()["reason"]) == (
        403, "challenge_refused", "missing")
    challenge = APIClient().post(f"{room}/challenge").json()
    assert challenge["bits"] == 8
    solution = challenge_solve(challenge["challenge"], challenge["bits"])
    first = buyer("ann").post(room, {}, format="json", HTTP_CHALLENGE_SOLUTION=solution)
    assert first.status_code == 200 and first.json()["position"] == 1
    assert buyer("ann").post(room, {}, format="json").json()["position"] == 1  # her place: no more work
    reused = buyer("bob").post(room, {}, format="json", HTTP_CHALLENGE_SOLUTION=solution)
    assert (reused.status_code, reused.json()["reason"]) == (403, "used")
    other = APIClient().post("/api/products/r-api/room/challenge")
    assert other.status_code == 404  # no such sale with a room
    assert Room.objects.get(product__sku="r-work").challenge_bits == 8


def test_a_rooms_work_is_set_with_its_rate(admin_api):
    refused = admin_api.post("/api/admin/products/r-work/reset", {"stock": 5, "room_challenge_bits": 8},
                             format="json")
    assert refused.status_code == 400 and "room_rate" in refused.json()["fields"]
    too_hard = admin_api.post("/api/admin/products/r-work/reset",
                              {"stock": 5, "room_rate": 1, "room_challenge_bits": 33}, format="json")
    assert too_hard.status_code == 400 and "room_challenge_bits" in too_hard.json()["fields"]
