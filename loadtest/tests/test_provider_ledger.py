"""The stand-in's API as the verdicts use it, a real HTTP server in this process: the
provider's ledger, read with Stripe's client library (its lists page as Stripe's do,
and each order's money is what its intents took and its refunds gave back), and the
knobs a webhook storm turns, and the deliveries a benchmark waits out."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests
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


class _SlowEndpoint(BaseHTTPRequestHandler):
    """A webhook endpoint that takes 0.3 s an event, counting deliveries under way."""

    def do_POST(self):  # noqa: N802 (http.server's names)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.mutex:
            self.server.now += 1
            self.server.most = max(self.server.most, self.server.now)
        time.sleep(0.3)
        with self.server.mutex:
            self.server.now -= 1
            self.server.seen += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_storm_delivers_each_event_up_to_three_times_at_once_then_calms():
    endpoint = ThreadingHTTPServer(("127.0.0.1", 0), _SlowEndpoint)
    endpoint.mutex, endpoint.now, endpoint.most, endpoint.seen = threading.Lock(), 0, 0, 0
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    provider = Provider(api_key=KEY, webhook_url=f"http://127.0.0.1:{endpoint.server_address[1]}/",
                        webhook_secret="whsec", knobs=Knobs())
    server = serve(provider)
    try:
        status, knobs = provider.handle("POST", "/_stand-in/knobs", {"duplicate": "1", "copies": "3",
                                                                     "workers": "4"}, None)
        assert status == 200 and knobs["workers"] == 4
        client = stripe.StripeClient(KEY, base_addresses={"api": f"http://127.0.0.1:{server.server_address[1]}"})
        for order_id in range(4):
            _pay(client, order_id)
        deadline = time.monotonic() + 10
        while not provider.idle() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert 2 * 4 <= endpoint.seen <= 3 * 4  # each event two or three times
        assert endpoint.most >= 2  # deliveries under way at once
        provider.handle("POST", "/_stand-in/knobs", {"workers": "1", "duplicate": "0"}, None)
        deadline = time.monotonic() + 5
        while provider._deliverers > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert provider._deliverers == 1
        assert provider.handle("POST", "/_stand-in/knobs", {"workers": "0"}, None)[0] == 400
    finally:
        server.shutdown()
        provider.stop()
        endpoint.shutdown()


def test_the_deliveries_say_what_waits_and_what_is_under_way_until_every_webhook_is_answered():
    endpoint = ThreadingHTTPServer(("127.0.0.1", 0), _SlowEndpoint)
    endpoint.mutex, endpoint.now, endpoint.most, endpoint.seen = threading.Lock(), 0, 0, 0
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    provider = Provider(api_key=KEY, webhook_url=f"http://127.0.0.1:{endpoint.server_address[1]}/",
                        webhook_secret="whsec", knobs=Knobs(workers=2))
    server = serve(provider)
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def deliveries(key=KEY):
        response = requests.get(f"{base}/_stand-in/deliveries", headers={"Authorization": f"Bearer {key}"},
                                timeout=5)
        return response.status_code, response.json()

    try:
        client = stripe.StripeClient(KEY, base_addresses={"api": base})
        provider.hold()
        for order_id in range(3):
            _pay(client, order_id)
        assert deliveries() == (200, {"object": "deliveries", "waiting": 3, "under_way": 0, "attempts": 0,
                                      "events": 3})
        provider.release()
        seen = []
        deadline = time.monotonic() + 10
        while (not seen or seen[-1]["waiting"] or seen[-1]["under_way"]) and time.monotonic() < deadline:
            seen.append(deliveries()[1])
            time.sleep(0.01)
        # Two at a time (each answered in 0.3 s), then none: all three answered.
        assert max(d["under_way"] for d in seen) == 2
        assert seen[-1] == {"object": "deliveries", "waiting": 0, "under_way": 0, "attempts": 3, "events": 3}
        assert endpoint.seen == 3
        assert deliveries(key="sk_test_other")[0] == 401
    finally:
        server.shutdown()
        provider.stop()
        endpoint.shutdown()
