"""Schemathesis' hooks for ``test_schemathesis.py`` (loaded through
``SCHEMATHESIS_HOOKS``): half of the generated requests name a product and an order
that exist, so that a purchase reaches the sale (201, 409 sold out) and a lookup
finds its row, instead of stopping at 404 for a made-up key. Everything else about a
request is schemathesis' own. Each answer's operation and status go to a file, so
that the test can tell what the run reached.

A payment with a valid order id pays a new order of that product, bought just before
the call: the product has a payment window, so the order waits for its payment and
the payment reaches the provider (202), as a buyer's would. A reset of the product
(the stateful phase follows a link to it) deletes its orders: the hooks then put it
back and buy again."""

import os
import threading
import uuid

import requests
import schemathesis
from hypothesis import strategies as st

from inventory.limits import SKU_MAX_LENGTH
from races.limits import MAX_BUYERS

SKU = os.environ["FLASHSALE_SCHEMATHESIS_SKU"]
ANSWERS = os.environ["FLASHSALE_SCHEMATHESIS_ANSWERS"]
BASE_URL = os.environ["FLASHSALE_SCHEMATHESIS_URL"]
STOCK = int(os.environ["FLASHSALE_SCHEMATHESIS_STOCK"])
WINDOW_S = int(os.environ["FLASHSALE_SCHEMATHESIS_WINDOW_S"])

_PURCHASE = "POST /api/orders"
_RACE = "POST /api/admin/races"
_RESET = "POST /api/admin/products/{sku}/reset"
_order = {"order_id": int(os.environ["FLASHSALE_SCHEMATHESIS_ORDER_ID"])}  # made again after a reset
_REAL_PATH = {
    "GET /api/orders/{order_id}": _order,
    "POST /api/orders/{order_id}/pay": _order,
    "GET /api/products/{sku}": {"sku": SKU},
    "GET /api/products/{sku}/audit": {"sku": SKU},
    "GET /api/products/{sku}/audit/summary": {"sku": SKU},
}
# A made-up id is a 404 every time, and the stateful phase's links give ids of orders
# a reset may have deleted since: a valid id is always a new order's, set just before
# the call (``before_call``), whichever phase made it.
_ALWAYS_REAL = {"POST /api/orders/{order_id}/pay"}
_write = threading.Lock()


def _valid_text(value, max_length: int) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= max_length and "\x00" not in value


def _valid_key(name: str, value) -> bool:
    """Whether the generated value was a valid one: only then is it swapped for the
    real one, so that a case meant to be invalid (schemathesis' negative tests) stays
    invalid in the part it broke."""
    if name == "order_id":
        return isinstance(value, int) and not isinstance(value, bool)
    return _valid_text(value, SKU_MAX_LENGTH)


def _label(ctx) -> str:
    return ctx.operation.label if ctx.operation is not None else ""


def _count(value, most: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= most


@schemathesis.hook
def flatmap_body(ctx, body):
    if _label(ctx) == _PURCHASE and isinstance(body, dict) and _valid_key("sku", body.get("sku")):
        return st.sampled_from([body, {**body, "sku": SKU}])
    if _label(ctx) == _RACE and isinstance(body, dict) and _count(body.get("buyers"), MAX_BUYERS):
        # A valid race stays valid, only small: the suite's stack is not raced for minutes.
        return st.just({**body, "buyers": min(body["buyers"], 5)})
    return st.just(body)


@schemathesis.hook
def flatmap_path_parameters(ctx, parameters):
    real = _REAL_PATH.get(_label(ctx))
    if (real and _label(ctx) not in _ALWAYS_REAL and isinstance(parameters, dict)
            and all(_valid_key(k, parameters.get(k)) for k in real)):
        return st.sampled_from([parameters, {**parameters, **real}])
    return st.just(parameters)


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if case.operation.label in _ALWAYS_REAL and isinstance(case.path_parameters, dict):
        if _valid_key("order_id", case.path_parameters.get("order_id")):
            with _write:
                case.path_parameters = {**case.path_parameters, "order_id": _bought()}


@schemathesis.hook
def after_call(ctx, case, response):
    with _write, open(ANSWERS, "a") as answers:
        answers.write(f"{case.operation.label}\t{response.status_code}\n")
    if case.operation.label == _RESET and (case.path_parameters or {}).get("sku") == SKU:
        with _write:
            _order_again()


def _order_again() -> None:
    """The product back to its stock and window, and an order of it."""
    _reopened()
    _order["order_id"] = _bought()


def _reopened() -> None:
    admin = {"Authorization": f"Token {os.environ['FLASHSALE_SCHEMATHESIS_ADMIN_TOKEN']}"}
    requests.post(f"{BASE_URL}/api/admin/products/{SKU}/reset",
                  json={"stock": STOCK, "payment_window_s": WINDOW_S}, headers=admin,
                  timeout=30).raise_for_status()


def _bought() -> int:
    """A new order of the product under the buyer's token, waiting for its payment
    (the product opened again first if the run itself closed it)."""
    def buy() -> requests.Response:
        buyer = {"Authorization": f"Bearer {os.environ['FLASHSALE_SCHEMATHESIS_BEARER']}",
                 "Idempotency-Key": uuid.uuid4().hex}
        return requests.post(f"{BASE_URL}/api/orders", json={"sku": SKU, "quantity": 1}, headers=buyer,
                             timeout=30)

    response = buy()
    if response.status_code != 201:
        _reopened()
        response = buy()
        response.raise_for_status()
    return response.json()["order_id"]
