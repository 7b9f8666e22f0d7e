"""The sign-in lockout on the real Redis and MariaDB, at every door: the API's token,
the shop's sign-in form, the admin's login, and the sign-up's "username taken"."""

import random

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from rest_framework.test import APIClient

from buyers import lockout, services
from common.errors import SignInLocked

pytestmark = pytest.mark.django_db

FEW = {"FLASHSALE_SIGN_IN_FREE_PER_USERNAME": 3, "FLASHSALE_SIGN_IN_FREE_PER_CLIENT": 6,
       "FLASHSALE_SIGN_IN_LOCKOUT_MAX_S": 900, "FLASHSALE_THROTTLE_SIGN_UP": ""}


@pytest.fixture(autouse=True)
def few():
    with override_settings(**FEW):
        yield


@pytest.fixture
def long_lockouts(monkeypatch):
    """The first lockout a minute: a slow machine's next try still meets it."""
    monkeypatch.setattr(lockout, "FIRST_LOCKOUT_S", 60)


def address() -> str:
    return f"10.{random.randrange(256)}.{random.randrange(256)}.{random.randrange(1, 255)}"


def sign_in(client, username, password="not the password"):
    return client.post("/api/buyers/token", {"username": username, "password": password}, format="json")


@pytest.fixture
def alice():
    get_user_model().objects.create_user("alice", password="a long passphrase")


def test_a_username_past_its_free_failures_is_429_with_retry_after_and_its_password_is_not_checked(
        alice, long_lockouts, monkeypatch):
    codes = [sign_in(APIClient(REMOTE_ADDR=address()), "alice").status_code for _ in range(4)]
    checked = []
    monkeypatch.setattr(services, "authenticate", lambda **kw: checked.append(kw))
    locked = sign_in(APIClient(REMOTE_ADDR=address()), "alice", "a long passphrase")
    assert codes == [401, 401, 401, 401]  # the 4th is counted, and locks
    assert locked.status_code == 429 and locked.json()["error"] == "throttled"
    assert locked["Retry-After"] == "60"
    assert checked == []  # refused before any password is hashed


def test_each_failure_past_the_free_ones_doubles_the_lockout_up_to_the_most(settings):
    settings.FLASHSALE_SIGN_IN_LOCKOUT_MAX_S = 10
    waits = []
    for _ in range(3 + 5):
        lockout.sign_in_failed(client=None, username="bob")
        try:
            lockout.sign_in_check(client=None, username="bob")
        except SignInLocked as e:
            waits.append(int(e.headers["Retry-After"]))
    assert waits == [1, 2, 4, 8, 10]


def test_one_client_trying_many_usernames_is_locked_out_and_another_client_is_not(alice, long_lockouts):
    guesser = APIClient(REMOTE_ADDR=address())
    codes = [sign_in(guesser, f"name-{n}").status_code for n in range(7)]
    assert codes == [401] * 7
    assert sign_in(guesser, "alice", "a long passphrase").status_code == 429
    assert sign_in(APIClient(REMOTE_ADDR=address()), "alice", "a long passphrase").status_code == 200


def test_an_ipv6_client_is_its_64(long_lockouts):
    prefix = f"2001:db8:{random.randrange(65536):x}:{random.randrange(65536):x}"
    codes = [sign_in(APIClient(REMOTE_ADDR=f"{prefix}::{n:x}"), f"name-{n}").status_code for n in range(1, 9)]
    assert codes == [401] * 7 + [429]


def test_signing_in_forgets_the_usernames_failures(alice):
    for _ in range(2):
        codes = [sign_in(APIClient(REMOTE_ADDR=address()), "alice").status_code for _ in range(3)]
        assert codes == [401] * 3
        assert sign_in(APIClient(REMOTE_ADDR=address()), "alice", "a long passphrase").status_code == 200


def test_the_shop_page_and_the_admin_login_are_locked_out_with_429(alice, long_lockouts):
    page = Client(REMOTE_ADDR=address())
    for _ in range(4):
        assert page.post("/buyers/sign-in", {"username": "alice", "password": "wrong"}).status_code == 200
    refused = page.post("/buyers/sign-in", {"username": "alice", "password": "a long passphrase"})
    assert refused.status_code == 429 and refused["Retry-After"] == "60"
    assert b"try again in 60 s" in refused.content
    admin = Client(REMOTE_ADDR=address())
    answer = admin.post("/admin/login/", {"username": "alice", "password": "a long passphrase"})
    assert answer.status_code == 429 and answer.json()["error"] == "throttled"


def test_the_admin_login_counts_its_own_failures(long_lockouts):
    get_user_model().objects.create_superuser("root", password="a long passphrase")
    admin = Client(REMOTE_ADDR=address())
    codes = [admin.post("/admin/login/", {"username": "root", "password": "wrong"}).status_code
             for _ in range(5)]
    assert codes == [200] * 4 + [429]


def test_asking_which_usernames_are_taken_is_locked_out_like_guessing(alice, long_lockouts):
    prober = APIClient(REMOTE_ADDR=address())
    codes = [prober.post("/api/buyers", {"username": "alice", "password": "a long passphrase"},
                         format="json").status_code for _ in range(8)]
    assert codes == [409] * 7 + [429]
    assert prober.post("/api/buyers", {}, format="json").status_code == 201  # no name asked
    page = Client(REMOTE_ADDR=prober.defaults["REMOTE_ADDR"])
    answer = page.post("/buyers/sign-up", {"username": "carol", "password": "a long passphrase"})
    assert answer.status_code == 429 and answer["Retry-After"]


def test_sign_in_passes_when_the_lockouts_redis_cannot_be_reached(alice):
    nowhere = {"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": "redis://127.0.0.1:1/0",
                           "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2}}}
    with override_settings(CACHES=nowhere):
        codes = [sign_in(APIClient(), "alice").status_code for _ in range(5)]
        right = sign_in(APIClient(), "alice", "a long passphrase")
    assert codes == [401] * 5 and right.status_code == 200
