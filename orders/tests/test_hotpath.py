"""The purchase's direct path (``flashsale.hotpath``) answers as DRF's dispatch does:
the same status, body and headers for any body, content type and key, on the real
MariaDB and Redis; and a plain JSON purchase does take the direct path."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from orders.apis import OrderCreateApi, _plain_purchase, _purchase_input
from orders.services import sale_reset

from .test_bad_input_property import EXAMPLES, bodies, content_types, header_text, values

factory = APIRequestFactory()
HEADERS = ("Content-Type", "Allow", "Vary", "Retry-After", "Idempotent-Replayed")


class ThroughDRF(OrderCreateApi):
    """The same view through DRF's own dispatch."""

    def dispatch(self, request, *args, **kwargs):
        return APIView.dispatch(self, request, *args, **kwargs)


def answer(view, body: bytes, content_type: str, key: str | None = None) -> tuple[int, object, dict]:
    extra = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    request = factory.generic("POST", "/api/orders", body, content_type=content_type, **extra)
    response = view.as_view()(request)
    if hasattr(response, "render"):
        response.render()
    return (response.status_code, json.loads(response.content),
            {h: response.get(h) for h in HEADERS})


@pytest.fixture
def spied(monkeypatch):
    """How often the view built a DRF Request (0 on the direct path)."""
    calls = []
    original = OrderCreateApi.initialize_request
    monkeypatch.setattr(OrderCreateApi, "initialize_request",
                        lambda self, request, *a, **k: calls.append(1) or original(self, request, *a, **k))
    return calls


@pytest.fixture
def sold_out(db):
    sale_reset(sku="sku-1", stock=0)


@pytest.mark.django_db
@EXAMPLES
@given(body=bodies, content_type=content_types,
       key=st.none() | st.sampled_from(["k-1", "", "has space", "é"]) | header_text)
def test_any_request_gets_the_answer_drf_gives(sold_out, body, content_type, key):
    assert answer(OrderCreateApi, body, content_type, key) == answer(ThroughDRF, body, content_type, key)


PLAIN = json.dumps({"sku": "sku-1", "quantity": 1, "user_id": "u1"}).encode()


@pytest.mark.django_db
@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=UTF-8"])
def test_a_plain_json_purchase_takes_the_direct_path_and_answers_as_drf(db, spied, content_type):
    sale_reset(sku="sku-1", stock=5)
    status, body, headers = answer(OrderCreateApi, PLAIN, content_type, key="k-1")
    assert (status, body["remaining"], body["status"]) == (201, 4, "confirmed")
    assert headers["Content-Type"] == "application/json"
    assert spied == []
    # Another order through DRF's dispatch: the same fields and headers.
    drf_status, drf_body, drf_headers = answer(ThroughDRF, PLAIN, content_type, key="k-2")
    assert (drf_status, drf_body.keys(), drf_headers) == (status, body.keys(), headers)
    # Its replay, through either path: the same answer.
    assert answer(OrderCreateApi, PLAIN, content_type, key="k-1") == answer(ThroughDRF, PLAIN, content_type,
                                                                            key="k-1")
    assert answer(OrderCreateApi, PLAIN, content_type, key="k-1")[0] == 200


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "content_type"), [
    (b"{not json", "application/json"),
    (PLAIN, "text/plain"),
    (PLAIN.decode().encode("utf-16"), "application/json; charset=utf-16"),
    (PLAIN.decode().encode("utf-16"), "application/json"),  # not UTF-8, as it says: DRF's 400
    (b"[" * 5000 + b"]" * 5000, "application/json"),
    (b'{"sku": "sku-1", "quantity": NaN, "user_id": "u1"}', "application/json"),
], ids=["malformed", "text-plain", "utf-16-declared", "utf-16-undeclared", "nested-too-deep", "nan"])
def test_what_is_not_plain_json_goes_through_drf(sold_out, spied, body, content_type):
    status, _, _ = answer(OrderCreateApi, body, content_type)
    assert spied == [1]
    assert status in (400, 415, 409)


@pytest.mark.django_db
def test_the_purchase_throttles_run_on_the_direct_path(sold_out, settings, spied):
    settings.FLASHSALE_THROTTLE_USER = "2/m"
    statuses = [answer(OrderCreateApi, PLAIN, "application/json")[0] for _ in range(3)]
    assert statuses == [409, 409, 429]
    assert spied == []


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
    plain = _plain_purchase(data)
    if plain is not None:
        assert plain == dict(_purchase_input.run_validation(data))


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
def test_which_purchases_skip_the_serializer(data, plain):
    assert (_plain_purchase(data) is not None) is plain
