"""Purchases with buyers signed in (``FLASHSALE_BUYER_AUTH``), on the real MariaDB and
Redis, through the apps' handler: the purchase's shortcut and Django's whole path."""

from __future__ import annotations

import json

import jwt
import pytest
from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory, override_settings

from buyers.tokens import ALGORITHM, AUDIENCE, token_issue
from inventory.models import Stock
from orders.models import Order
from orders.reset import sale_reset
from orders.wsgi import PurchaseWSGIHandler

pytestmark = [pytest.mark.django_db(transaction=True)]

SKU = "signed-in-1"
factory = RequestFactory()
handler = PurchaseWSGIHandler()


@pytest.fixture(autouse=True)
def signed_in():
    with override_settings(FLASHSALE_BUYER_AUTH=True, FLASHSALE_THROTTLE_USER="",
                           FLASHSALE_THROTTLE_ADDRESS=""):
        yield


def bearer(buyer: str) -> str:
    return f"Bearer {token_issue(username=buyer).token}"


def buy(body: dict, authorization: str | None = None, *, shortcut: bool = True, key: str | None = None):
    """Status, JSON body and headers of a purchase through the apps' handler."""
    from django.conf import settings

    meta = {"HTTP_X_REQUEST_ID": "t-1"}
    if authorization is not None:
        meta["HTTP_AUTHORIZATION"] = authorization
    if key is not None:
        meta["HTTP_IDEMPOTENCY_KEY"] = key
    request = factory.generic("POST", "/api/orders", json.dumps(body).encode(),
                              content_type="application/json", **meta)
    before, settings.FLASHSALE_PURCHASE_SHORTCUT = settings.FLASHSALE_PURCHASE_SHORTCUT, shortcut
    try:
        response = handler.get_response(request)
    finally:
        settings.FLASHSALE_PURCHASE_SHORTCUT = before
    return response.status_code, json.loads(response.content), dict(response.items())


def nothing_written(stock: int) -> bool:
    return Stock.objects.get(product__sku=SKU).quantity == stock and not Order.objects.exists()


@pytest.mark.parametrize("strategy", ["atomic", "gate"])
@pytest.mark.parametrize("shortcut", [True, False], ids=["shortcut", "django"])
def test_a_purchase_takes_its_buyer_from_the_token(strategy, shortcut):
    sale_reset(sku=SKU, stock=5, strategy=strategy)
    code, body, _ = buy({"sku": SKU, "quantity": 1}, bearer("alice"), shortcut=shortcut)
    assert code == 201, body
    if strategy == "atomic":
        assert Order.objects.get().user_id == "alice"


@pytest.mark.parametrize("shortcut", [True, False], ids=["shortcut", "django"])
def test_without_credentials_or_with_a_refused_token_nothing_is_written(shortcut):
    sale_reset(sku=SKU, stock=5, strategy="atomic")
    forged = jwt.encode({"sub": "alice", "aud": AUDIENCE, "iat": 0, "exp": 4_000_000_000}, b"guessed",
                        algorithm=ALGORITHM)
    expired = token_issue(username="alice", seconds=60, now=0).token
    refused = [(None, "not_authenticated"), (f"Bearer {forged}", "authentication_failed"),
               (f"Bearer {expired}", "authentication_failed"), ("Bearer", "authentication_failed"),
               ("Basic YWxpY2U6cHc=", "not_authenticated")]
    for authorization, error in refused:
        code, body, headers = buy({"sku": SKU, "quantity": 1}, authorization, shortcut=shortcut)
        assert (code, body["error"]) == (401, error), (authorization, body)
        assert headers["WWW-Authenticate"] == "Bearer"
    assert nothing_written(5)


def test_one_buyer_cannot_pass_the_per_user_limit_by_naming_itself_otherwise():
    sale_reset(sku=SKU, stock=10, strategy="atomic")
    alice = bearer("alice")
    with override_settings(FLASHSALE_PER_USER_LIMIT=1):
        for n in range(5):
            code, body, _ = buy({"sku": SKU, "quantity": 1, "user_id": f"alice{n}"}, alice)
            assert (code, list(body["fields"])) == (400, ["user_id"]), body
        assert nothing_written(10)
        assert buy({"sku": SKU, "quantity": 1}, alice)[0] == 201
        code, body, _ = buy({"sku": SKU, "quantity": 1}, alice)
        assert (code, body["error"]) == (409, "limit_reached")
        assert buy({"sku": SKU, "quantity": 1}, bearer("bob"))[0] == 201
    assert sorted(Order.objects.values_list("user_id", flat=True)) == ["alice", "bob"]


def test_the_shortcut_answers_as_djangos_path_does():
    alice = bearer("alice")
    for body in ({"sku": "no-such-sku", "quantity": 1}, {"sku": SKU, "quantity": 1, "user_id": "alice"},
                 {"sku": SKU}):
        fast, slow = buy(body, alice), buy(body, alice, shortcut=False)
        assert fast[:2] == slow[:2]
        assert {k: v for k, v in fast[2].items() if k != "Server-Timing"} == {
            k: v for k, v in slow[2].items() if k != "Server-Timing"}


@pytest.mark.parametrize("strategy", ["atomic", "gate"])
def test_an_order_is_shown_to_its_buyer_and_the_admin_and_to_nobody_else(strategy):
    sale_reset(sku=SKU, stock=5, strategy=strategy)
    _, bought, _ = buy({"sku": SKU, "quantity": 1}, bearer("alice"))
    client = Client()
    path = f"/api/orders/{bought['order_id']}"
    mine = client.get(path, HTTP_AUTHORIZATION=bearer("alice"))
    assert mine.status_code == 200 and mine.json()["order_id"] == bought["order_id"]
    theirs = client.get(path, HTTP_AUTHORIZATION=bearer("bob"))
    missing = client.get(f"/api/orders/{bought['order_id'] + 2}", HTTP_AUTHORIZATION=bearer("bob"))
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["error"] == "not_found"
    assert client.get(path).status_code == 401
    with override_settings(FLASHSALE_ADMIN_TOKEN="the-admin"):
        assert client.get(path, HTTP_AUTHORIZATION="Token the-admin").status_code == 200


def test_the_pages_session_buys_only_with_its_csrf_token():
    sale_reset(sku=SKU, stock=5, strategy="atomic")
    user = get_user_model().objects.create_user("carol", password="a long passphrase")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    secret = "a" * 32
    browser.cookies["csrftoken"] = secret
    refused = browser.post("/api/orders", {"sku": SKU, "quantity": 1}, content_type="application/json")
    assert refused.status_code == 403 and refused.json()["error"] == "permission_denied"
    assert nothing_written(5)
    taken = browser.post("/api/orders", {"sku": SKU, "quantity": 1}, content_type="application/json",
                         HTTP_X_CSRFTOKEN=secret)
    assert taken.status_code == 201, taken.json()
    assert Order.objects.get().user_id == "carol"


@pytest.mark.parametrize("strategy", ["atomic", "gate"])
@pytest.mark.parametrize("shortcut", [True, False], ids=["shortcut", "django"])
def test_an_idempotency_key_is_its_buyers_own(strategy, shortcut):
    """Another buyer's use of a key neither replays nor blocks this buyer's purchase
    with it; the buyer's own retry replays, and its reuse with another body conflicts."""
    sale_reset(sku=SKU, stock=5, strategy=strategy)
    first = buy({"sku": SKU, "quantity": 1}, bearer("alice"), key="shared-key", shortcut=shortcut)
    other = buy({"sku": SKU, "quantity": 1}, bearer("bob"), key="shared-key", shortcut=shortcut)
    assert (first[0], other[0]) == (201, 201), (first, other)
    assert first[1]["order_id"] != other[1]["order_id"]
    again = buy({"sku": SKU, "quantity": 1}, bearer("bob"), key="shared-key", shortcut=shortcut)
    assert (again[0], again[1]["order_id"], again[2].get("Idempotent-Replayed")) == (
        200, other[1]["order_id"], "true")
    code, body, _ = buy({"sku": SKU, "quantity": 2}, bearer("alice"), key="shared-key", shortcut=shortcut)
    assert (code, body["error"]) == (409, "idempotency_conflict"), body
    assert body.get("order_id", first[1]["order_id"]) == first[1]["order_id"]  # if named, the buyer's own
    long_key = "k" * 128  # with the buyer's name, past the column: kept as a digest
    assert buy({"sku": SKU, "quantity": 1}, bearer("alice"), key=long_key, shortcut=shortcut)[0] == 201
    assert buy({"sku": SKU, "quantity": 1}, bearer("bob"), key=long_key, shortcut=shortcut)[0] == 201
    assert buy({"sku": SKU, "quantity": 1}, bearer("bob"), key=long_key, shortcut=shortcut)[0] == 200
