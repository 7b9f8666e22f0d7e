"""The provider's ledger, read with Stripe's client library from the stand-in (a real
HTTP server in this process): its lists page as Stripe's do, and each order's money
is what its intents took and its refunds gave back."""

import stripe

from loadtest.provider_ledger import provider_ledger
from payprovider.server import Knobs, Provider, serve

KEY = "sk_test_ledger"


def _pay(client, order_id, amount=999, card="pm_card_visa"):
    params = {"amount": amount, "currency": "usd", "payment_method": card, "confirm": True,
              "metadata": {"order_id": str(order_id)}}
    try:
        return client.v1.payment_intents.create(params=params)
    except stripe.CardError:
        return None


def test_each_order_has_what_it_was_charged_and_refunded():
    provider = Provider(api_key=KEY, webhook_url=None, webhook_secret="whsec", knobs=Knobs())
    server = serve(provider)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        client = stripe.StripeClient(KEY, base_addresses={"api": base})
        for order_id in range(1, 121):  # more than a page of 100
            _pay(client, order_id)
        second = _pay(client, 5)  # a second payment of one order, refunded
        client.v1.refunds.create(params={"payment_intent": second.id})
        _pay(client, 7, card="pm_card_chargeDeclined")  # declined: nothing taken
        ledger = dict((o, (c, r)) for o, c, r in provider_ledger(base, KEY, [5, 7, 8, 119, 500]))
    finally:
        server.shutdown()
        provider.stop()
    assert ledger == {5: (2 * 999, 999), 7: (999, 0), 8: (999, 0), 119: (999, 0)}


def test_a_list_refuses_a_page_size_stripe_refuses():
    provider = Provider(api_key=KEY, webhook_url=None, webhook_secret="whsec", knobs=Knobs())
    status, body = provider.handle("GET", "/v1/payment_intents", {"limit": "101"}, None)
    assert status == 400 and body["error"]["param"] == "limit"
