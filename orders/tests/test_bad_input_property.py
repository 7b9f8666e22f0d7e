"""No input of any shape gets a 500 (Hypothesis): random bodies and headers thrown at
the purchase and at the admin reset, with the admin token and without. Every answer
is JSON; every refusal is a 4xx with an error code and writes nothing."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from common.testing import idle_transaction_allowed
from inventory.models import Stock, StockFlow
from orders.models import Order

# JSON of any shape, and the purchase's own fields with values of any shape.
scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=80)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)
purchase_like = st.fixed_dictionaries({}, optional={"sku": values | st.just("sku-1"),
                                                    "quantity": values | st.integers(-2, 8),
                                                    "user_id": values, "stock": values})
# Nested deeper than Python's JSON decoder goes, up to nginx's 16 KB.
deep = st.tuples(st.integers(1, 8000), st.sampled_from(["[]", "{}"])).map(
    lambda nb: ((nb[1][0] if nb[1] == "[]" else '{"a":') * nb[0] + ("" if nb[1] == "[]" else "1")
                + nb[1][1] * nb[0]).encode())
bodies = (values.map(lambda v: json.dumps(v).encode()) | purchase_like.map(lambda v: json.dumps(v).encode())
          | st.binary(max_size=200) | deep)
# Header values as HTTP carries them: latin-1 text without line breaks.
header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=140)
content_types = st.sampled_from(["application/json", "application/json; charset=utf-16", "text/plain",
                                 "application/x-www-form-urlencoded", "multipart/form-data", ""])

EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.function_scoped_fixture])


def written() -> tuple[int, int, int]:
    return Order.objects.count(), StockFlow.objects.count(), Stock.objects.get(product__sku="sku-1").quantity


def answered_truthfully(response, before, *, created: tuple[int, ...]) -> None:
    assert response.status_code < 500, response.content
    body = response.json()  # JSON, whatever came in
    if response.status_code in created:
        return
    assert 400 <= response.status_code < 500 and body["error"] and body["message"], body
    assert written() == before  # a refusal wrote nothing


@pytest.fixture
def product(product_factory):
    return product_factory(sku="sku-1", stock=1000, name="Phone")


@pytest.fixture(autouse=True)
def _idle_between_examples(db):
    # The test's transaction idles while Hypothesis makes each example (up to 8,000
    # levels deep): a busy machine stretches that past the server's idle cut.
    with idle_transaction_allowed():
        yield


@pytest.mark.django_db
@EXAMPLES
@given(body=bodies, content_type=content_types, key=st.none() | header_text)
def test_a_purchase_of_any_shape_is_answered_in_json_and_a_refusal_writes_nothing(
        product, body, content_type, key):
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    before = written()
    # generic(): the body goes as these bytes, whatever the content type says.
    response = APIClient().generic("POST", "/api/orders", data=body, content_type=content_type, **headers)
    answered_truthfully(response, before, created=(200, 201))


@pytest.mark.django_db
@EXAMPLES
@given(body=bodies, token=st.sampled_from(["Token test-admin-token", "Token wrong", ""]) | header_text)
def test_a_reset_of_any_shape_is_answered_in_json_and_a_refusal_writes_nothing(product, body, token):
    headers = {"HTTP_AUTHORIZATION": token} if token else {}
    before = written()
    response = APIClient().generic("POST", "/api/admin/products/sku-1/reset", data=body,
                                   content_type="application/json", **headers)
    answered_truthfully(response, before, created=(200,))
