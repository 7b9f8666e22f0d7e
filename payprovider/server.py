"""The stand-in's HTTP API and its webhook deliveries (see the package's docstring)."""

from __future__ import annotations

import functools
import hashlib
import heapq
import hmac
import itertools
import json
import logging
import random
import re
import secrets
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

logger = logging.getLogger("payprovider")

# The test payment methods flashsale's docs name, as Stripe's test mode has them.
SUCCEEDS = "pm_card_visa"
DECLINED = "pm_card_chargeDeclined"


@dataclass
class Knobs:
    """How far from a well-behaved provider this one is."""

    duplicate: float = 0.0  # share of events delivered more than once
    copies: int = 2  # deliveries of such an event: 2 to this many
    workers: int = 1  # deliveries under way at once (more: concurrent, in any order)
    delay_ms: int = 0  # each delivery waits 0..delay_ms first: events overtake each other
    decline: float = 0.0  # share of payments declined whatever the card
    retry_base_s: float = 0.5  # a failed delivery is tried again after base * 2**attempt
    retry_cap_s: float = 30.0
    attempts: int = 12  # deliveries of one event before it is given up (Stripe: 3 days of them)


@dataclass(order=True)
class _Delivery:
    due: float
    seq: int
    event: dict = field(compare=False)
    attempt: int = field(default=0, compare=False)


class Provider:
    """The provider's state (intents, refunds, events, idempotency keys), in memory,
    and its deliverer."""

    def __init__(self, *, api_key: str, webhook_url: str | None, webhook_secret: str, knobs: Knobs,
                 rng: random.Random | None = None):
        self.api_key, self.webhook_url, self.webhook_secret = api_key, webhook_url, webhook_secret
        self.knobs = knobs
        self.rng = rng or random.Random()
        self.lock = threading.Lock()
        self.intents: dict[str, dict] = {}
        self.refunds: dict[str, dict] = {}
        self.events: list[dict] = []
        self.keys: dict[str, tuple[str, int, dict]] = {}  # idempotency key -> (request, status, answer)
        self.delivered: list[tuple[str, int]] = []  # (event id, status) per attempt, for tests
        self._queue: list[_Delivery] = []
        self._seq = itertools.count()
        self._wake = threading.Condition(self.lock)
        self._stopped = False
        self._delivering = 0
        self._deliverers = 0  # deliverer threads running
        self._held = False

    # --- the API ---------------------------------------------------------------

    def handle(self, method: str, path: str, params: dict, key: str | None) -> tuple[int, dict]:
        route = {("POST", "/v1/payment_intents"): self._intent_create,
                 ("POST", "/v1/refunds"): self._refund_create}.get((method, path))
        confirmed = re.fullmatch(r"/v1/payment_intents/([^/]+)/confirm", path)
        if method == "POST" and confirmed:
            route = functools.partial(self._intent_confirm, confirmed.group(1))
        listed = {"/v1/payment_intents": self.intents, "/v1/refunds": self.refunds}.get(path)
        if method == "GET" and listed is not None:
            return self._list(path, listed, params)
        if route is None and method == "GET" and path.startswith("/v1/payment_intents/"):
            return self._intent_get(path.rsplit("/", 1)[1])
        if (method, path) == ("POST", "/_stand-in/knobs"):
            return self._knobs_set(params)
        if (method, path) == ("GET", "/_stand-in/deliveries"):
            return 200, self.deliveries()
        if route is None:
            return _error(404, "invalid_request_error", f"Unrecognized request URL ({method}: {path})")
        with self.lock:
            if key is not None:
                request = json.dumps([path, params], sort_keys=True)
                if key in self.keys:
                    first, status, answer = self.keys[key]
                    if first != request:
                        return _error(400, "idempotency_error", "Keys for idempotent requests can only be "
                                      "used with the same parameters they were first used with.")
                    return status, answer
            status, answer = route(params)
            if key is not None and status < 500:
                self.keys[key] = (request, status, answer)
            return status, answer

    def _intent_create(self, params: dict) -> tuple[int, dict]:
        try:
            amount = int(params.get("amount", ""))
        except ValueError:
            return _error(400, "invalid_request_error", "Missing required param: amount.", param="amount")
        if amount < 1:
            return _error(400, "invalid_request_error", "Amount must be at least 1.", param="amount")
        intent = {"id": _id("pi"), "object": "payment_intent", "amount": amount,
                  "currency": params.get("currency", "usd"), "status": "requires_payment_method",
                  "metadata": _nested(params, "metadata"), "created": int(time.time()),
                  "latest_charge": None, "last_payment_error": None, "livemode": False}
        self.intents[intent["id"]] = intent
        method = params.get("payment_method")
        if params.get("confirm") != "true" or not method:
            return 200, dict(intent)
        return self._charge(intent, method)

    def _intent_confirm(self, intent_id: str, params: dict) -> tuple[int, dict]:
        """Confirm an intent with a payment method: again after a decline (the intent
        waits for another), never once it succeeded."""
        intent = self.intents.get(intent_id)
        if intent is None:
            return _error(404, "invalid_request_error", f"No such payment_intent: '{intent_id}'")
        if intent["status"] != "requires_payment_method":
            return _error(400, "invalid_request_error", "You cannot confirm this PaymentIntent because it "
                          f"has a status of {intent['status']}.", code="payment_intent_unexpected_state")
        method = params.get("payment_method")
        if not method:
            return _error(400, "invalid_request_error", "You cannot confirm this PaymentIntent because it's "
                          "missing a payment method.", code="payment_intent_unexpected_state")
        return self._charge(intent, method)

    def _charge(self, intent: dict, method: str) -> tuple[int, dict]:
        """Charge ``intent`` with ``method`` (the lock is held): declined, refused, or
        succeeded, each with its event."""
        if method == DECLINED or self.rng.random() < self.knobs.decline:
            error = {"type": "card_error", "code": "card_declined", "decline_code": "generic_decline",
                     "message": "Your card was declined.", "payment_intent": dict(intent)}
            intent["last_payment_error"] = error
            self._event("payment_intent.payment_failed", intent)
            return 402, {"error": {**error, "payment_intent": dict(intent)}}
        if method != SUCCEEDS:
            return _error(400, "invalid_request_error", f"No such PaymentMethod: '{method}'",
                          param="payment_method")
        intent.update(status="succeeded", latest_charge=_id("ch"))
        self._event("payment_intent.succeeded", intent)
        return 200, dict(intent)

    def _intent_get(self, intent_id: str) -> tuple[int, dict]:
        with self.lock:
            intent = self.intents.get(intent_id)
            if intent is None:
                return _error(404, "invalid_request_error", f"No such payment_intent: '{intent_id}'")
            return 200, dict(intent)

    def _list(self, path: str, objects: dict[str, dict], params: dict) -> tuple[int, dict]:
        """Stripe's list: newest first, ``limit`` (1 to 100, 10 unless given) a page,
        the next page ``starting_after`` the last id of this one."""
        try:
            limit = int(params.get("limit", 10))
        except ValueError:
            limit = 0
        if not 1 <= limit <= 100:
            return _error(400, "invalid_request_error", "This value must be between 1 and 100.",
                          param="limit")
        with self.lock:
            ids = list(reversed(objects))
            after = params.get("starting_after")
            if after is not None:
                if after not in objects:
                    return _error(400, "invalid_request_error", f"No such object: '{after}'",
                                  param="starting_after")
                ids = ids[ids.index(after) + 1:]
            page = [dict(objects[i]) for i in ids[:limit]]
        return 200, {"object": "list", "url": path, "has_more": len(ids) > limit, "data": page}

    def _knobs_set(self, params: dict) -> tuple[int, dict]:
        """Not Stripe's: how badly it delivers, changed while it runs (a nemesis's
        webhook storm, and the calm after it)."""
        try:
            changed = {name: type(getattr(self.knobs, name))(value) for name, value in params.items()
                       if name in ("duplicate", "copies", "delay_ms", "workers")}
        except ValueError as e:
            return _error(400, "invalid_request_error", str(e))
        if changed.get("workers", 1) < 1:
            return _error(400, "invalid_request_error", "workers must be at least 1.", param="workers")
        with self.lock:
            for name, value in changed.items():
                setattr(self.knobs, name, value)
            self._wake.notify_all()  # deliverers past the new count leave
        self.deliverers_start()
        return 200, {"object": "knobs", **vars(self.knobs)}

    def deliverers_start(self) -> None:
        """As many deliverers as ``knobs.workers`` says (those past it leave by themselves)."""
        with self.lock:
            more = max(0, self.knobs.workers - self._deliverers)
            self._deliverers += more
        for _ in range(more):
            threading.Thread(target=self.deliver_forever, name="payprovider-webhooks", daemon=True).start()

    def _refund_create(self, params: dict) -> tuple[int, dict]:
        intent = self.intents.get(params.get("payment_intent", ""))
        if intent is None or intent["status"] != "succeeded":
            return _error(400, "invalid_request_error", "This PaymentIntent has no successful charge to "
                          "refund.", param="payment_intent")
        if intent.get("refunded"):
            return _error(400, "invalid_request_error", f"Charge {intent['latest_charge']} has already been "
                          "refunded.", code="charge_already_refunded")
        intent["refunded"] = True
        refund = {"id": _id("re"), "object": "refund", "amount": intent["amount"], "status": "succeeded",
                  "payment_intent": intent["id"], "charge": intent["latest_charge"],
                  "metadata": _nested(params, "metadata"), "created": int(time.time())}
        self.refunds[refund["id"]] = refund
        self._event("charge.refunded", {"id": intent["latest_charge"], "object": "charge", "refunded": True,
                                        "amount_refunded": intent["amount"], "payment_intent": intent["id"],
                                        "metadata": intent["metadata"]})
        return 200, dict(refund)

    # --- events and their deliveries ---------------------------------------------

    def _event(self, kind: str, obj: dict) -> None:
        """Record an event and queue its deliveries (the lock is held)."""
        event = {"id": _id("evt"), "object": "event", "type": kind, "created": int(time.time()),
                 "api_version": "2025-01-27.acacia", "livemode": False, "pending_webhooks": 1,
                 "data": {"object": json.loads(json.dumps(obj))}}
        self.events.append(event)
        if self.webhook_url is None:
            return
        twice = self.rng.random() < self.knobs.duplicate
        copies = self.rng.randint(2, max(2, self.knobs.copies)) if twice else 1
        for _ in range(copies):
            self._queue_delivery(event, attempt=0)

    def _queue_delivery(self, event: dict, attempt: int) -> None:
        if attempt == 0:
            wait = self.rng.uniform(0, self.knobs.delay_ms / 1000)
        else:
            wait = min(self.knobs.retry_cap_s, self.knobs.retry_base_s * 2 ** (attempt - 1))
        heapq.heappush(self._queue, _Delivery(time.monotonic() + wait, next(self._seq), event, attempt))
        self._wake.notify()

    def deliver_forever(self) -> None:
        """A deliverer: each delivery when it is due. With one (``workers``), one at a
        time, which keeps the order the delays chose; with more, several at once, as
        Stripe's are."""
        while True:
            with self.lock:
                while not self._stopped and self._deliverers <= self.knobs.workers and (
                        self._held or not self._queue or self._queue[0].due > time.monotonic()):
                    self._wake.wait(None if self._held or not self._queue
                                    else self._queue[0].due - time.monotonic())
                if self._stopped or self._deliverers > self.knobs.workers:
                    self._deliverers -= 1
                    return
                delivery = heapq.heappop(self._queue)
                self._delivering += 1
            status = self._post(delivery.event)
            with self.lock:
                self._delivering -= 1
                self.delivered.append((delivery.event["id"], status))
                if not 200 <= status < 300 and delivery.attempt + 1 < self.knobs.attempts:
                    self._queue_delivery(delivery.event, delivery.attempt + 1)

    def _post(self, event: dict) -> int:
        body = json.dumps(event)
        stamp = int(time.time())
        signed = f"{stamp}.{body}".encode()
        signature = hmac.new(self.webhook_secret.encode(), signed, hashlib.sha256).hexdigest()
        request = urllib.request.Request(self.webhook_url, data=body.encode(), method="POST", headers={
            "Content-Type": "application/json; charset=utf-8",
            "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
            "Stripe-Signature": f"t={stamp},v1={signature}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as e:
            logger.info("webhook %s (%s) answered %d", event["id"], event["type"], e.code)
            return e.code
        except OSError as e:
            logger.info("webhook %s (%s) not delivered: %s", event["id"], event["type"], e)
            return 0

    def stop(self) -> None:
        with self.lock:
            self._stopped = True
            self._wake.notify_all()

    def hold(self) -> None:
        """Deliver nothing until ``release``: webhooks as late as a test needs them."""
        with self.lock:
            self._held = True

    def release(self) -> None:
        with self.lock:
            self._held = False
            self._wake.notify_all()  # every deliverer: each waits without a timeout while held

    def resend(self, event_id: str) -> None:
        """Deliver an event again, as Stripe's dashboard resends one."""
        with self.lock:
            event = next(e for e in self.events if e["id"] == event_id)
            self._queue_delivery(event, attempt=0)

    def idle(self) -> bool:
        """No delivery waiting or under way."""
        with self.lock:
            return not self._queue and not self._delivering

    def deliveries(self) -> dict:
        """Not Stripe's: the deliveries waiting (retries among them), under way and
        made so far; a client waits for none waiting or under way before it reads
        what the webhooks did."""
        with self.lock:
            return {"object": "deliveries", "waiting": len(self._queue), "under_way": self._delivering,
                    "attempts": len(self.delivered), "events": len(self.events)}


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _nested(params: dict, name: str) -> dict:
    """``metadata[order_id]=5`` and its kind, as Stripe's form encoding sends a hash."""
    prefix = f"{name}["
    return {k[len(prefix):-1]: v for k, v in params.items() if k.startswith(prefix) and k.endswith("]")}


def _error(status: int, kind: str, message: str, **more: str) -> tuple[int, dict]:
    return status, {"error": {"type": kind, "message": message, **more}}


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 (http.server's names)
        self._answer("GET")

    def do_POST(self):  # noqa: N802
        self._answer("POST")

    def _answer(self, method: str) -> None:
        provider = self.server.provider
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        if method == "GET" and self.path == "/healthz":  # for a supervisor's probe: no key needed
            status, answer = 200, {"ok": True}
        elif self.headers.get("Authorization") != f"Bearer {provider.api_key}":
            status, answer = _error(401, "invalid_request_error", "Invalid API Key provided.")
        else:
            path, _, query = self.path.partition("?")
            params = dict(parse_qsl(query if method == "GET" else body))
            status, answer = provider.handle(method, path, params, self.headers.get("Idempotency-Key"))
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Request-Id", _id("req"))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):  # noqa: A002 (http.server's signature)
        logger.debug("%s - %s", self.address_string(), format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    provider: Provider


def serve(provider: Provider, *, host: str = "127.0.0.1", port: int = 0) -> _Server:
    """Serve ``provider`` on ``host:port`` (0: any free port) from threads, its
    deliverer beside; ``server.shutdown()`` and ``provider.stop()`` end them."""
    server = _Server((host, port), _Handler)
    server.provider = provider
    threading.Thread(target=server.serve_forever, name="payprovider-http", daemon=True).start()
    provider.deliverers_start()
    return server
