"""The buyers' API on the real MariaDB: a new buyer, a throwaway one, a sign-in."""

import random

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.test import APIClient

from buyers.tokens import token_buyer

pytestmark = pytest.mark.django_db


@pytest.fixture
def client():
    with override_settings(FLASHSALE_THROTTLE_SIGN_UP=""):
        yield APIClient()


def test_a_buyer_signs_up_and_in_and_each_token_names_it(client):
    made = client.post("/api/buyers", {"username": "alice", "password": "a long passphrase"}, format="json")
    assert made.status_code == 201, made.json()
    assert made.json()["username"] == "alice" and token_buyer(made.json()["token"]) == "alice"
    signed_in = client.post("/api/buyers/token", {"username": "alice", "password": "a long passphrase"},
                            format="json")
    assert signed_in.status_code == 200 and token_buyer(signed_in.json()["token"]) == "alice"
    assert get_user_model().objects.get(username="alice").check_password("a long passphrase")


def test_a_throwaway_buyer_has_a_token_and_no_password(client):
    made = client.post("/api/buyers", {}, format="json")
    assert made.status_code == 201
    name = made.json()["username"]
    assert name.startswith("buyer-") and token_buyer(made.json()["token"]) == name
    assert not get_user_model().objects.get(username=name).has_usable_password()


@pytest.mark.parametrize(("body", "field"), [
    ({"username": "bob", "password": "short"}, "password"),
    ({"username": "bob", "password": "password123"}, "password"),  # a common one
    ({"username": "bob bob", "password": "a long passphrase"}, "username"),
    ({"username": "b" * 65, "password": "a long passphrase"}, "username"),
    ({"password": "a long passphrase"}, "username"),
    ({"username": "bob", "password": "a long passphrase", "admin": True}, "admin"),
    ({"username": 7, "password": "a long passphrase"}, "username"),
])
def test_a_buyer_that_cannot_be_made_is_refused_by_field_and_nothing_is_written(client, body, field):
    answer = client.post("/api/buyers", body, format="json")
    assert answer.status_code == 400 and answer.json()["error"] == "invalid"
    assert field in answer.json()["fields"], answer.json()
    assert not get_user_model().objects.exists()


def test_a_taken_username_is_409_and_a_wrong_password_401_saying_nothing_more(client):
    client.post("/api/buyers", {"username": "alice", "password": "a long passphrase"}, format="json")
    again = client.post("/api/buyers", {"username": "alice", "password": "another passphrase"}, format="json")
    assert again.status_code == 409 and again.json()["error"] == "username_taken"
    for body in ({"username": "alice", "password": "not hers at all"},
                 {"username": "nobody", "password": "a long passphrase"}):
        answer = client.post("/api/buyers/token", body, format="json")
        assert answer.status_code == 401 and answer["WWW-Authenticate"] == "Bearer"
        assert answer.json() == {"error": "authentication_failed",
                                 "message": "the username and password sign no buyer in"}


def test_new_buyers_are_throttled_per_address():
    with override_settings(FLASHSALE_THROTTLE_SIGN_UP="2/m"):
        address = f"10.{random.randrange(256)}.{random.randrange(256)}.7"  # counted afresh each run
        client = APIClient(REMOTE_ADDR=address)
        codes = [client.post("/api/buyers", {}, format="json").status_code for _ in range(3)]
    assert codes == [201, 201, 429]


def test_new_buyers_from_one_ipv6_64_share_its_count_and_the_next_64_has_its_own():
    # Whoever holds a /64 holds 2^64 addresses: counted per address, each a new bucket.
    prefix = f"2001:db8:{random.randrange(65536):x}:{random.randrange(65535):x}"  # counted afresh each run
    with override_settings(FLASHSALE_THROTTLE_SIGN_UP="2/m"):
        codes = [APIClient(REMOTE_ADDR=f"{prefix}::{n:x}").post("/api/buyers", {}, format="json").status_code
                 for n in range(1, 4)]
        next_64 = prefix.rsplit(":", 1)[0] + f":{int(prefix.rsplit(':', 1)[1], 16) + 1:x}::1"
        other = APIClient(REMOTE_ADDR=next_64).post("/api/buyers", {}, format="json").status_code
    assert (codes, other) == ([201, 201, 429], 201)


def test_a_buyer_is_made_when_the_throttles_redis_cannot_be_reached():
    nowhere = {"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": "redis://127.0.0.1:1/0",
                           "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2}}}
    with override_settings(CACHES=nowhere, FLASHSALE_THROTTLE_SIGN_UP="2/m"):
        made = APIClient().post("/api/buyers", {}, format="json")
    assert made.status_code == 201  # a throttle protects the sale; it does not stop it


def test_when_new_buyers_cost_work_one_comes_with_a_solved_challenge_used_once(client, settings):
    from common.challenges import challenge_solve

    settings.FLASHSALE_SIGN_UP_CHALLENGE_BITS = 8
    before = get_user_model().objects.count()
    refused = client.post("/api/buyers", {}, format="json")
    assert (refused.status_code, refused.json()["error"], refused.json()["reason"]) == (
        403, "challenge_refused", "missing")
    challenge = client.post("/api/buyers/challenge").json()
    assert challenge["bits"] == 8 and challenge["expires_at"] > 0
    solution = challenge_solve(challenge["challenge"], challenge["bits"])
    made = client.post("/api/buyers", {}, format="json", HTTP_CHALLENGE_SOLUTION=solution)
    assert made.status_code == 201
    again = client.post("/api/buyers", {}, format="json", HTTP_CHALLENGE_SOLUTION=solution)
    assert (again.status_code, again.json()["reason"]) == (403, "used")
    assert get_user_model().objects.count() == before + 1
