"""An operator resets a sale while buyers buy it, through nginx and two instances:
the new sale holds no order that its terms refuse, however often it is tried.

The recipe is the lifecycle issue's: 24 buyers keep buying an open ``atomic`` sale,
and the admin resets it to 100 units that go on sale in an hour, behind a waiting
room, each order with a payment window. Every purchase the new terms would take is
refused (it has not started), so the new sale must have no order at all, and all
its stock. (Before the reset fenced its purchases, each try left dozens of orders.)
"""

import threading
import time
import uuid

import pytest

from loadtest.client import FlashsaleClient

pytestmark = pytest.mark.e2e

BUYERS = 24
TRIES = 3
NEW_TERMS = dict(starts_in=3600, room_rate=1, payment_window_s=300)


def _buy_until(stop: threading.Event, client: FlashsaleClient, sku: str, buyer: str, answers: list) -> None:
    while not stop.is_set():
        answers.append(client.order(sku, 1, buyer).status_code)


def _own_session(client: FlashsaleClient) -> FlashsaleClient:
    """A client like ``client`` on a session of its own (a session is one thread's)."""
    return FlashsaleClient(client.base_url, client.admin_token, tokens=client.tokens)


@pytest.mark.parametrize("strategy", ["atomic", "redisson"])
def test_a_reset_under_load_leaves_no_order_its_new_terms_refuse(stack_apps, strategy):
    admin = stack_apps()
    labels = [f"reset-buyer-{n}" for n in range(BUYERS)]
    if admin.tokens is not None:
        admin.tokens.signed_up(labels)  # before the clock starts: a sign-up costs a hash
    for attempt in range(TRIES):
        sku = f"reset-load-{strategy}-{uuid.uuid4().hex[:8]}"
        admin.reset(sku, 1000, strategy=strategy)  # open now: every buyer is sold to
        stop, answers = threading.Event(), []
        buyers = [threading.Thread(target=_buy_until, args=(stop, _own_session(admin), sku, label, answers))
                  for label in labels]
        for buyer in buyers:
            buyer.start()
        try:
            time.sleep(0.5)  # the old sale sells
            admin.reset(sku, 100, strategy=strategy, **NEW_TERMS)
            time.sleep(0.5)  # the buyers keep asking, now of the new sale
        finally:
            stop.set()
            for buyer in buyers:
                buyer.join(60)
        assert answers.count(201) > 0, "the old sale sold nothing: the race was not run"
        audit = admin.audit(sku)
        assert (audit["orders"], audit["remaining"], audit["consistent"]) == (0, 100, True), (attempt, audit)
        assert 409 in answers  # not_started: the new terms, answered
