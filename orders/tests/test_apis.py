import json
import time
import uuid

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient, APIRequestFactory

from inventory.models import Stock, StockFlow
from orders.models import Order

ORDER = {"sku": "sku-1", "quantity": 2, "user_id": "u1"}


@pytest.fixture
def api():
    return APIClient()


@pytest.fixture
def product(product_factory):
    return product_factory(sku="sku-1", stock=10, name="Phone")


def post_order(api, body=ORDER, key="k1", raw=None, content_type="application/json", **extra):
    headers = ({"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}) | extra
    data = raw if raw is not None else json.dumps(body)
    return api.post("/api/orders", data=data, content_type=content_type, **headers)


def nothing_written(product) -> bool:
    return (not Order.objects.exists() and not StockFlow.objects.exists()
            and Stock.objects.get(product=product).quantity == 10)


@pytest.mark.django_db
def test_order_created(api, product):
    response = post_order(api)
    assert response.status_code == 201
    body = response.json()
    assert body == {"order_id": body["order_id"], "sku": "sku-1", "quantity": 2, "remaining": 8,
                    "strategy": "atomic", "instance": "test", "status": "confirmed"}
    assert "Idempotent-Replayed" not in response.headers
    # lock-wait;dur=0.004, hold;dur=2.345 (ms), arrival;desc=<epoch seconds>
    metrics = [part.strip().split(";") for part in response.headers["Server-Timing"].split(",")]
    assert [m[0] for m in metrics] == ["lock-wait", "hold", "arrival"]
    assert abs(float(metrics[2][1].removeprefix("desc=")) - time.time()) < 60


@pytest.mark.django_db
def test_every_answer_carries_its_arrival_a_refusal_too(api, product):
    response = post_order(api, {"sku": "sku-1", "quantity": 0, "user_id": "u"})
    assert response.status_code == 400
    assert response.headers["Server-Timing"].startswith("arrival;desc=")


@pytest.mark.django_db
def test_replay_is_200_with_the_same_body_and_header(api, product):
    first = post_order(api)
    second = post_order(api)
    assert second.status_code == 200
    assert second.json() == first.json()
    assert second.headers["Idempotent-Replayed"] == "true"
    # A replay took nothing: no lock wait, no hold, only its arrival.
    assert second.headers["Server-Timing"].startswith("arrival;")
    assert Order.objects.count() == 1


@pytest.mark.django_db
def test_conflicting_reuse_of_a_key_is_409(api, product):
    post_order(api)
    response = post_order(api, body={**ORDER, "quantity": 1})
    assert response.status_code == 409
    assert response.json()["error"] == "idempotency_conflict"


@pytest.mark.django_db
def test_sold_out_is_409(api, product_factory):
    product_factory(sku="sku-1", stock=1)
    response = post_order(api)
    assert response.status_code == 409
    assert response.json() == {"error": "sold_out", "message": "sku-1: 2 requested, 1 left",
                               "sku": "sku-1", "requested": 2, "remaining": 1}


@pytest.mark.django_db
def test_unknown_sku_is_404(api, product):
    response = post_order(api, body={**ORDER, "sku": "nope"})
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert nothing_written(product)


BAD_ORDERS = {
    "malformed json": dict(raw="{not json"),
    "json array": dict(raw="[1, 2]"),
    # 10 KB, under nginx's 16 KB limit, and deeper than Python's JSON decoder goes.
    "arrays nested 5,000 deep": dict(raw="[" * 5000 + "]" * 5000),
    "objects nested 2,000 deep": dict(raw='{"a": ' * 2000 + "1" + "}" * 2000),
    "not UTF-8": dict(raw=b'{"sku": "\xff\xfe", "quantity": 1, "user_id": "u1"}'),
    "missing sku": dict(body={"quantity": 1, "user_id": "u1"}),
    "missing quantity": dict(body={"sku": "sku-1", "user_id": "u1"}),
    "missing user_id": dict(body={"sku": "sku-1", "quantity": 1}),
    "quantity zero": dict(body={**ORDER, "quantity": 0}),
    "quantity negative": dict(body={**ORDER, "quantity": -3}),
    "quantity above the per-order maximum": dict(body={**ORDER, "quantity": 6}),
    "quantity not a number": dict(body={**ORDER, "quantity": "two"}),
    "quantity fractional": dict(body={**ORDER, "quantity": 1.5}),
    "quantity boolean": dict(body={**ORDER, "quantity": True}),
    "sku too long": dict(body={**ORDER, "sku": "s" * 65}),
    "user_id too long": dict(body={**ORDER, "user_id": "u" * 65}),
    "empty user_id": dict(body={**ORDER, "user_id": ""}),
    "an unknown key (a typo)": dict(body={**ORDER, "qty": 2}),
    "sku a number": dict(body={**ORDER, "sku": 1}),
    "user_id a number": dict(body={**ORDER, "user_id": 7}),
    "idempotency key too long": dict(key="k" * 129),
    "idempotency key with spaces": dict(key="two words"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", BAD_ORDERS.values(), ids=BAD_ORDERS.keys())
def test_bad_input_is_400_and_writes_nothing(api, product, case):
    response = post_order(api, **case)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid"
    assert response.json()["message"]
    assert nothing_written(product)


@pytest.mark.django_db
@pytest.mark.parametrize("accept", ["text/html", "application/xml", "image/*;q=0.5", "nonsense"])
def test_any_accept_header_is_answered_in_json_not_406(api, product, accept):
    response = post_order(api, key=f"accept-{accept}", HTTP_ACCEPT=accept)
    assert response.status_code == 201 and response["Content-Type"] == "application/json"
    assert response.json()["order_id"]
    product_answer = api.get(f"/api/products/{product.sku}", HTTP_ACCEPT=accept)
    assert product_answer.status_code == 200 and product_answer.json()["sku"] == product.sku


@pytest.mark.django_db
def test_form_encoded_body_is_415_json_error(api, product):
    response = api.post("/api/orders", data="sku=sku-1", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert response.json()["error"] == "unsupported_media_type"
    assert nothing_written(product)


@pytest.mark.django_db
def test_get_on_orders_is_405_json_error(api):
    response = api.get("/api/orders")
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"


@pytest.mark.django_db
def test_product_detail_and_audit(api, product):
    post_order(api)
    assert api.get("/api/products/sku-1").json() == {
        "sku": "sku-1", "name": "Phone", "stock": 8, "initial_stock": 10, "segments": 1,
        "starts_at": None, "ends_at": None, "strategy": settings.FLASHSALE_STRATEGY, "payment_window_s": 0}
    audit = api.get("/api/products/sku-1/audit", HTTP_AUTHORIZATION="Token test-admin-token").json()
    assert audit == {"sku": "sku-1", "initial_stock": 10, "remaining": 8, "orders": 1,
                     "ordered_quantity": 2, "flow_rows": 1, "flow_quantity": 2, "oversold": 0,
                     "lost_updates": 0, "consistent": True, "retries": 0,
                     "segments_remaining": [8], "gate": None, "starts_at": None, "ends_at": None,
                     "strategy": settings.FLASHSALE_STRATEGY, "returned_quantity": 0,
                     "orders_by_status": {"placed": 1}}


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/products/nope", "/api/products/nope/audit",
                                  "/api/products/nope/audit/summary"])
def test_unknown_product_is_404(api, path):
    response = api.get(path, HTTP_AUTHORIZATION="Token test-admin-token")
    assert response.status_code == 404 and response.json()["error"] == "not_found"


@pytest.mark.django_db
def test_the_full_audit_is_the_admins_and_the_summary_anyones(api, product):
    post_order(api)
    anonymous = api.get("/api/products/sku-1/audit")
    assert anonymous.status_code == 401 and anonymous.json()["error"] == "not_authenticated"
    assert anonymous.headers["WWW-Authenticate"] == "Token"
    wrong = api.get("/api/products/sku-1/audit", HTTP_AUTHORIZATION="Token nope")
    assert wrong.status_code == 401
    summary = api.get("/api/products/sku-1/audit/summary")
    assert summary.status_code == 200
    body = summary.json()
    assert body.pop("as_of")
    assert body == {"sku": "sku-1", "initial_stock": 10, "orders": 1, "sold": 2, "remaining": 8,
                    "consistent": True}


def test_unknown_url_is_a_json_404(api):
    response = api.get("/api/nothing/here")
    assert response.status_code == 404 and response.json()["error"] == "not_found"


# --- reset: the admin API -------------------------------------------------------------

RESET = "/api/admin/products/sku-1/reset"


@pytest.mark.django_db
def test_reset_with_the_admin_token(api, product):
    post_order(api)
    api.credentials(HTTP_AUTHORIZATION="Token test-admin-token")
    response = api.post(RESET, {"stock": 4, "name": "Tablet"}, format="json")
    assert response.status_code == 200
    assert response.json() == {"sku": "sku-1", "name": "Tablet", "stock": 4, "initial_stock": 4,
                               "segments": 1, "starts_at": None, "ends_at": None,
                               "strategy": settings.FLASHSALE_STRATEGY, "payment_window_s": 0}
    assert not Order.objects.exists() and not StockFlow.objects.exists()


@pytest.mark.django_db
def test_reset_in_segments_splits_the_stock_and_the_audit_shows_each(api, product):
    api.credentials(HTTP_AUTHORIZATION="Token test-admin-token")
    response = api.post(RESET, {"stock": 10, "segments": 4}, format="json")
    assert response.status_code == 200
    assert response.json() == {"sku": "sku-1", "name": "Phone", "stock": 10, "initial_stock": 10,
                               "segments": 4, "starts_at": None, "ends_at": None,
                               "strategy": settings.FLASHSALE_STRATEGY, "payment_window_s": 0}
    assert post_order(api).status_code == 201  # 2 units from one segment
    audit = api.get("/api/products/sku-1/audit").json()  # the admin token, set above
    assert (audit["remaining"], audit["consistent"]) == (8, True)
    assert sorted(audit["segments_remaining"]) in ([1, 2, 2, 3], [0, 2, 3, 3])  # from a 3 or a 2


@pytest.mark.django_db
def test_reset_creates_an_unknown_product(api):
    api.credentials(HTTP_AUTHORIZATION="Token test-admin-token")
    response = api.post("/api/admin/products/new-1/reset", {"stock": 3}, format="json")
    assert response.status_code == 200
    assert response.json() == {"sku": "new-1", "name": "new-1", "stock": 3, "initial_stock": 3, "segments": 1,
                               "starts_at": None, "ends_at": None, "strategy": settings.FLASHSALE_STRATEGY,
                               "payment_window_s": 0}


@pytest.mark.django_db
def test_reset_with_a_staff_session(api, product):
    api.force_login(User.objects.create_user("op", is_staff=True))
    assert api.post(RESET, {"stock": 4}, format="json").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("auth, status, error", [
    (None, 401, "not_authenticated"),
    ("Token wrong", 401, "authentication_failed"),
    ("Token", 401, "authentication_failed"),
    ("Bearer test-admin-token", 401, "not_authenticated"),
])
def test_reset_without_valid_credentials_is_401(api, product, auth, status, error):
    if auth:
        api.credentials(HTTP_AUTHORIZATION=auth)
    response = api.post(RESET, {"stock": 4}, format="json")
    assert response.status_code == status
    assert response.json()["error"] == error
    assert response.headers["WWW-Authenticate"] == "Token"
    assert Stock.objects.get(product=product).quantity == 10


@pytest.mark.django_db
@override_settings(FLASHSALE_ADMIN_FAILURES="3/m")
def test_wrong_admin_tokens_are_throttled_per_address_and_logged_before_any_comparison(
        api, product, caplog, monkeypatch):
    def new_client() -> str:  # a counter of its own (XFF, one proxy): an IPv6 /64 of its own
        return f"2001:db8:{uuid.uuid4().hex[:4]}::1"

    address = new_client()

    def reset(token: str, client: str = address):
        api.credentials(HTTP_AUTHORIZATION=f"Token {token}", HTTP_X_FORWARDED_FOR=client)
        return api.post(RESET, {"stock": 4}, format="json")

    assert [reset("wrong").status_code for _ in range(3)] == [401, 401, 401]
    throttled = reset("wrong")
    assert throttled.status_code == 429 and throttled.json()["error"] == "throttled"
    assert 0 < int(throttled.headers["Retry-After"]) <= 60
    assert f"admin token refused (invalid token) from {address}" in caplog.text
    assert reset("wrong", client=new_client()).status_code == 401  # per address
    assert Stock.objects.get(product=product).quantity == 10
    # A spent address is answered before its token is compared, the right one included.
    compared = []
    monkeypatch.setattr("orders.auth.hmac.compare_digest", lambda a, b: compared.append(a) or a == b)
    assert reset("test-admin-token").status_code == 429
    assert compared == [] and Stock.objects.get(product=product).quantity == 10
    assert reset("test-admin-token", client=new_client()).status_code == 200


@pytest.mark.django_db
def test_a_reset_is_logged_with_what_it_did_and_the_address(api, product, caplog):
    api.credentials(HTTP_AUTHORIZATION="Token test-admin-token", HTTP_X_FORWARDED_FOR="198.51.100.7")
    with caplog.at_level("INFO", logger="orders.auth"):
        assert api.post(RESET, {"stock": 4}, format="json").status_code == 200
    [line] = [r.getMessage() for r in caplog.records if r.name == "orders.auth"]
    assert line == "admin reset sku='sku-1' stock=4 by admin-token from 198.51.100.7"


@pytest.mark.django_db
def test_behind_a_terminator_two_trusted_proxies_tell_buyers_apart(api, product, settings):
    """Production's NUM_PROXIES: X-Forwarded-For is "buyer, terminator" when it reaches
    the app; one trusted proxy would count every buyer as the terminator."""
    from orders.auth import client_address

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 2}
    factory = APIRequestFactory()
    seen = {client_address(factory.get("/", HTTP_X_FORWARDED_FOR=f"{buyer}, 10.0.0.2"))
            for buyer in ("203.0.113.1", "203.0.113.2")}
    assert seen == {"203.0.113.1", "203.0.113.2"}


@pytest.mark.django_db
def test_a_reset_takes_a_name_as_given_and_an_unknown_key_is_named(api, product):
    api.credentials(HTTP_AUTHORIZATION="Token test-admin-token")
    assert api.post(RESET, {"stock": 4, "name": " \u001f "}, format="json").json()["name"] == " \u001f "
    response = api.post(RESET, {"stock": 4, "stok": 6}, format="json")
    assert response.status_code == 400 and response.json()["fields"] == {"stok": ["unknown field"]}


@pytest.mark.django_db
def test_reset_by_a_non_staff_session_is_403(api, product):
    api.force_login(User.objects.create_user("buyer"))
    response = api.post(RESET, {"stock": 4}, format="json")
    assert response.status_code == 403
    assert response.json()["error"] == "permission_denied"
    assert Stock.objects.get(product=product).quantity == 10


@pytest.mark.django_db
@pytest.mark.parametrize("body", [{}, {"stock": -1}, {"stock": "many"}, {"stock": 5, "name": "n" * 201},
                                  {"stock": 5, "segments": 0}, {"stock": 5, "segments": 65},
                                  {"stock": 5, "segments": "many"}, {"stock": 5, "name": 0},
                                  {"stock": 5, "stok": 6}])
def test_reset_with_bad_input_is_400_and_changes_nothing(api, product, body):
    api.credentials(HTTP_AUTHORIZATION="Token test-admin-token")
    response = api.post(RESET, body, format="json")
    assert response.status_code == 400 and response.json()["error"] == "invalid"
    assert Stock.objects.get(product=product).quantity == 10


@pytest.mark.django_db
def test_reset_with_an_over_long_sku_is_400(api):
    api.credentials(HTTP_AUTHORIZATION="Token test-admin-token")
    response = api.post(f"/api/admin/products/{'s' * 65}/reset", {"stock": 1}, format="json")
    assert response.status_code == 400
    assert not Stock.objects.exists()


# --- schema, page ---------------------------------------------------------------------


@pytest.mark.django_db
def test_openapi_schema_describes_the_contract(api):
    response = api.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    paths = json.loads(response.content)["paths"]
    assert {"/api/orders", "/api/products/{sku}", "/api/products/{sku}/audit",
            "/api/products/{sku}/audit/summary", "/api/admin/products/{sku}/reset"} <= set(paths)
    assert "201" in paths["/api/orders"]["post"]["responses"]


@pytest.mark.django_db
def test_page_renders_product_strategy_and_csrf(client, product):
    response = client.get("/?sku=sku-1")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<script id="sku-data" type="application/json">"sku-1"</script>' in html
    assert "csrfmiddlewaretoken" in html and "atomic" in html
    assert "csrftoken" in response.cookies
