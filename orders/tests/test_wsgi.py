"""The purchase's shortcut (``orders.wsgi``) answers as Django's whole path does: the
same status, body and headers for any body, content type and key, on the real
MariaDB and Redis; a plain JSON purchase is answered by the shortcut, anything else by
Django; and the deployed application is the shortcut's handler."""

from __future__ import annotations

import json
import re

import pytest
from django.test import RequestFactory
from hypothesis import example, given
from hypothesis import strategies as st

from orders import wsgi as shortcut_module
from orders.apis import OrderCreateApi, _buyer_input, _purchase_input, plain_purchase
from orders.reset import sale_reset
from orders.wsgi import PurchaseWSGIHandler

from .test_bad_input_property import EXAMPLES, bodies, content_types, header_text, values

factory = RequestFactory()
handler = PurchaseWSGIHandler()


def answer(body: bytes, content_type: str, key: str | None = None, *, shortcut: bool = True,
           **meta) -> tuple[int, object, dict]:
    """The answer the apps' handler gives (Django's whole path if not ``shortcut``):
    status, JSON body, and every header, Server-Timing by its metrics' names (its
    values are times)."""
    from django.conf import settings

    extra = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    meta.setdefault("HTTP_X_REQUEST_ID", "t-1")  # else each answer names itself anew
    request = factory.generic("POST", "/api/orders", body, content_type=content_type, **extra, **meta)
    before, settings.FLASHSALE_PURCHASE_SHORTCUT = settings.FLASHSALE_PURCHASE_SHORTCUT, shortcut
    try:
        response = handler.get_response(request)
    finally:
        settings.FLASHSALE_PURCHASE_SHORTCUT = before
    headers = dict(response.items())
    headers["Server-Timing"] = re.findall(r"([\w-]+);", headers.get("Server-Timing", ""))
    return response.status_code, json.loads(response.content), headers


@pytest.fixture
def through_view(monkeypatch):
    """How many requests reached the purchase's view (0: the shortcut answered)."""
    calls = []
    original = OrderCreateApi.dispatch
    monkeypatch.setattr(OrderCreateApi, "dispatch",
                        lambda self, request, *a, **k: calls.append(1) or original(self, request, *a, **k))
    return calls


@pytest.fixture
def sold_out(db):
    sale_reset(sku="sku-1", stock=0)


@pytest.mark.django_db
@EXAMPLES
@given(body=bodies, content_type=content_types,
       key=st.none() | st.sampled_from(["k-1", "", "has space", "é"]) | header_text)
def test_any_request_gets_the_answer_djangos_path_gives(sold_out, body, content_type, key):
    assert answer(body, content_type, key) == answer(body, content_type, key, shortcut=False)


PLAIN = json.dumps({"sku": "sku-1", "quantity": 1, "user_id": "u1"}).encode()


@pytest.mark.django_db
@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=UTF-8"])
def test_a_plain_json_purchase_is_answered_by_the_shortcut_as_by_django(db, through_view, content_type):
    sale_reset(sku="sku-1", stock=5)
    status, body, headers = answer(PLAIN, content_type, key="k-1")
    assert (status, body["remaining"], body["status"]) == (201, 4, "confirmed")
    assert headers["Server-Timing"] == ["lock-wait", "hold", "arrival"]
    assert headers["Content-Length"] == str(len(json.dumps(body, separators=(",", ":"))))
    assert through_view == []
    # Another order through Django's path: the same fields and headers.
    drf_status, drf_body, drf_headers = answer(PLAIN, content_type, key="k-2", shortcut=False)
    assert through_view == [1]
    assert drf_body["order_id"] != body["order_id"]
    assert (drf_status, drf_body.keys(), {**drf_headers, "Content-Length": "*"}) == (
        status, body.keys(), {**headers, "Content-Length": "*"})
    # Its replay, through either path: the same answer.
    assert answer(PLAIN, content_type, key="k-1") == answer(PLAIN, content_type, key="k-1", shortcut=False)
    assert answer(PLAIN, content_type, key="k-1")[0] == 200


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "content_type"), [
    (b"{not json", "application/json"),
    (PLAIN, "text/plain"),
    (PLAIN.decode().encode("utf-16"), "application/json; charset=utf-16"),
    (PLAIN.decode().encode("utf-16"), "application/json"),  # not UTF-8, as it says: DRF's 400
    (b"[" * 5000 + b"]" * 5000, "application/json"),
    (b'{"sku": "sku-1", "quantity": NaN, "user_id": "u1"}', "application/json"),
    (b'{"sku": "sku-1", "quantity": "1", "user_id": "u1"}', "application/json"),
], ids=["malformed", "text-plain", "utf-16-declared", "utf-16-undeclared", "nested-too-deep", "nan",
        "not-plain"])
def test_what_is_not_a_plain_json_purchase_goes_through_django(sold_out, through_view, body, content_type):
    status, _, _ = answer(body, content_type)
    assert through_view == [1]
    assert status in (400, 415, 409)


@pytest.mark.django_db
def test_the_shortcut_names_its_answer_as_djangos_path_does(sold_out, through_view):
    for shortcut in (True, False):
        status, _, headers = answer(PLAIN, "application/json", shortcut=shortcut, HTTP_X_REQUEST_ID="named-1")
        assert (status, headers["X-Request-ID"]) == (409, "named-1")
    assert through_view == [1]  # the second


@pytest.mark.django_db
def test_a_disallowed_host_and_an_https_redirect_are_djangos(sold_out, through_view, settings):
    request = factory.post("/api/orders", PLAIN, content_type="application/json", HTTP_HOST="evil.example")
    assert handler.get_response(request).status_code == 400
    settings.SECURE_SSL_REDIRECT = True  # read when the middleware is made, as Django's is
    request = factory.post("/api/orders", PLAIN, content_type="application/json")
    response = PurchaseWSGIHandler().get_response(request)
    assert (response.status_code, response["Location"]) == (301, "https://testserver/api/orders")
    assert through_view == []  # the middleware answered both, before the view


@pytest.mark.django_db
def test_a_body_over_djangos_limit_is_djangos_400(sold_out, through_view, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(PLAIN) - 1
    request = factory.post("/api/orders", PLAIN, content_type="application/json")
    assert handler.get_response(request).status_code == 400
    assert through_view == [1]  # the shortcut left it to Django's path


@pytest.mark.django_db
def test_the_purchase_throttles_run_on_the_shortcut(sold_out, settings, through_view):
    settings.FLASHSALE_THROTTLE_USER = "2/m"
    answers = [answer(PLAIN, "application/json") for _ in range(3)]
    assert [status for status, _, _ in answers] == [409, 409, 429]
    assert answers[2][1]["error"] == "throttled" and int(answers[2][2]["Retry-After"]) > 0
    assert through_view == []


@pytest.mark.django_db
def test_an_unexpected_error_is_djangos_500_on_either_path(sold_out, monkeypatch):
    def broken(**purchase):
        raise RuntimeError("a bug")

    monkeypatch.setattr(shortcut_module, "purchase_answer", lambda request, purchase: broken(**purchase))
    monkeypatch.setattr("orders.apis.order_create", broken)
    direct = answer(PLAIN, "application/json")
    assert direct[0] == 500 and direct == answer(PLAIN, "application/json", shortcut=False)


def test_the_apps_serve_through_the_shortcut():
    from flashsale.wsgi import application

    assert isinstance(application, PurchaseWSGIHandler)


# The purchase's own fields, often in the plain shape, at and past their lengths:
# text of ASCII (NUL included), or of any code point (lone surrogates included).
texts = st.text(st.characters(max_codepoint=0x7F) | st.characters(blacklist_categories=()), max_size=70)
purchases = st.fixed_dictionaries({"sku": texts | values, "quantity": st.integers() | values,
                                   "user_id": texts | values}, optional={"stock": values})


def _purchase(**fields):
    return {"sku": "sku-1", "quantity": 1, "user_id": "u1", **fields}


@EXAMPLES
@given(data=purchases | values)
@example(_purchase(sku="s\x00"))
@example(_purchase(user_id="\ud800"))
@example(_purchase(sku=" s "))
@example(_purchase(user_id="u\t"))
def test_a_plain_purchase_is_what_the_serializer_makes_of_it(data):
    plain = plain_purchase(data)
    if plain is not None:
        assert plain == dict(_purchase_input.run_validation(data))
    if isinstance(data, dict):  # the same body with the buyer its credentials' instead
        data = {k: v for k, v in data.items() if k != "user_id"}
    plain = plain_purchase(data, by_credentials=True)
    if plain is not None:
        assert plain == dict(_buyer_input.run_validation(data))


@pytest.mark.parametrize(("data", "plain"), [
    ({"sku": "sku-1", "quantity": 1, "user_id": "u1"}, True),
    ({"sku": "s" * 64, "quantity": -3, "user_id": "u" * 64}, True),  # order_create refuses the quantity
    ({"sku": "s" * 65, "quantity": 1, "user_id": "u1"}, False),
    ({"sku": "sku-1", "quantity": 1, "user_id": ""}, False),
    ({"sku": "sku-1", "quantity": True, "user_id": "u1"}, False),
    ({"sku": "sku-1", "quantity": "1", "user_id": "u1"}, False),  # the serializer takes it, as a number
    ({"sku": "sku\x00", "quantity": 1, "user_id": "u1"}, False),
    ({"sku": "sk\u00fc", "quantity": 1, "user_id": "u1"}, False),
    ({"sku": "sku-1", "quantity": 1, "user_id": "u1", "qty": 1}, False),
    ({"sku": "sku-1", "quantity": 1}, False),
], ids=["common", "longest", "sku-too-long", "blank-user", "bool", "numeric-string", "nul", "non-ascii",
        "unknown-key", "missing-key"])
def test_which_purchases_the_shortcut_takes_as_they_are(data, plain):
    assert (plain_purchase(data) is not None) is plain


@pytest.mark.parametrize("change", [
    lambda m: [*m, "django.middleware.gzip.GZipMiddleware"],  # added later: purchases would skip it
    lambda m: [m[0], *m[2:]],  # one taken out: the shortcut would still do its work
    lambda m: list(reversed(m)),  # reordered
])
def test_the_shortcut_refuses_to_start_when_middleware_differs_from_what_it_mirrors(settings, change):
    from django.core.exceptions import ImproperlyConfigured

    assert PurchaseWSGIHandler()  # as deployed: MIDDLEWARE is the mirrored list
    settings.MIDDLEWARE = change(list(shortcut_module.MIRRORED_MIDDLEWARE))
    with pytest.raises(ImproperlyConfigured, match="purchase's shortcut mirrors"):
        PurchaseWSGIHandler()
    settings.FLASHSALE_PURCHASE_SHORTCUT = False
    assert PurchaseWSGIHandler()  # off, Django's whole path answers every purchase
