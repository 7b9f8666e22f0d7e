"""The payment step's tests buy in process, the buyer named in the body (as the
orders' tests do): what they test is behind the authentication. Payments go to the
provider's stand-in (``payprovider``) over HTTP, with Stripe's client library, and
its webhooks come back over HTTP through Django's whole request path."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection
from django.test import Client

from payprovider.server import Knobs, Provider, serve


@pytest.fixture(autouse=True)
def _buyer_in_the_body(settings):
    settings.FLASHSALE_BUYER_AUTH = False


API_KEY, WEBHOOK_SECRET = "sk_test_flashsale", "whsec_flashsale_test"


class _Relay(BaseHTTPRequestHandler):
    """The webhook's endpoint as the provider reaches it, over HTTP: each delivery
    goes through Django's whole request path (``django.test.Client``) to the view."""

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        extra = {}
        if self.headers.get("Stripe-Signature") is not None:
            extra["HTTP_STRIPE_SIGNATURE"] = self.headers["Stripe-Signature"]
        try:
            response = Client().post("/api/payments/webhook", data=body, content_type="application/json",
                                     **extra)
            self.server.answers.append((response.status_code, response.json()))
            status, data = response.status_code, response.content
        finally:
            connection.close()  # this thread's, before the test's flush
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def provider(settings):
    """The stand-in provider on a free port, its webhooks delivered to this process's
    Django; the settings point the payments app at it. ``provider.relay.answers``
    holds the webhook's answers, in order."""
    relay = ThreadingHTTPServer(("127.0.0.1", 0), _Relay)
    relay.answers = []
    threading.Thread(target=relay.serve_forever, daemon=True).start()
    stand_in = Provider(api_key=API_KEY, webhook_url=f"http://127.0.0.1:{relay.server_port}/",
                        webhook_secret=WEBHOOK_SECRET, knobs=Knobs(retry_base_s=0.05, attempts=5))
    server = serve(stand_in)
    settings.FLASHSALE_PAYMENTS_API_BASE = f"http://127.0.0.1:{server.server_port}"
    settings.FLASHSALE_PAYMENTS_API_KEY = API_KEY
    settings.FLASHSALE_PAYMENTS_WEBHOOK_SECRET = WEBHOOK_SECRET
    stand_in.relay = relay
    yield stand_in
    server.shutdown()
    stand_in.stop()
    relay.shutdown()


def delivered(provider, within: float = 10.0) -> None:
    """Wait until the provider has no delivery waiting or under way."""
    deadline = time.monotonic() + within
    while not provider.idle():
        assert time.monotonic() < deadline, "the provider's webhooks did not settle"
        time.sleep(0.02)
