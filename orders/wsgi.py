"""The purchase's shortcut: a plain JSON purchase answered before Django's request path.

A sale's requests are almost all purchases. Through Django each one paid the
middleware chain (eight middleware: a session, a user and a message store made for a
request that reads none of them), the URL resolver and DRF's view, around a service
that is the sale itself, and most of an accepted gate purchase's CPU was that path,
not the service and its Redis round trip (measured with ``python -m
benchmarks.purchase_cpu``; the figures are on the gate's page, docs/strategies/gate.md).

``PurchaseWSGIHandler`` is Django's WSGI handler (the same request object, signals, response
and its closing) whose ``get_response`` first offers the request to ``purchase_shortcut``.
The shortcut takes a POST to the purchase's path whose body is plain: UTF-8 JSON of the
three fields in the shape the serializer takes as it is (``orders.apis.plain_purchase``).
It checks what the middleware would have refused it for (the host, an HTTPS redirect),
runs the view's throttles and its ``purchase_answer``, and renders the answer with the
view's renderer and the headers the view and the middleware add. Any other request,
and every request while ``FLASHSALE_PURCHASE_SHORTCUT`` is off, goes through Django whole:
its answers (415, 400 ``invalid``, 405, the host's 400) are Django's and DRF's own.

Left out, and why a purchase does not need it: sessions, authentication, messages and
CSRF (without ``FLASHSALE_BUYER_AUTH`` the view reads no session or user; with it, the
shortcut takes only a purchase with a valid bearer token, which it checks itself, and
leaves a session's purchase, and any refused token, to Django's path), the URL
resolver (one path), content negotiation (one renderer). ``orders/tests/test_wsgi.py`` holds the
shortcut to the answers Django's path gives: status, body and every header.
"""

from __future__ import annotations

import time
from typing import Any, NoReturn

from django.conf import settings
from django.core.exceptions import DisallowedHost, ImproperlyConfigured, RequestDataTooBig
from django.core.handlers.exception import response_for_exception
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.security import SecurityMiddleware
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.log import log_response
from rest_framework.utils import json

from buyers.authentication import TokenBuyer, bearer_buyer
from buyers.tokens import TokenRefused
from common.errors import error_response
from common.metrics import request_ended, request_started
from common.middleware import stamp_arrival
from common.requestlog import request_named

from .apis import OrderCreateApi, plain_purchase, purchase_answer
from .metrics import purchase_counted

# Charsets the shortcut decodes itself; Django's path decodes any other a client names.
_UTF8 = {"utf-8", "utf8"}

# The middleware the shortcut was written against, in order, and what it does for each
# (the module's docstring says why the rest are left out). A purchase answered here
# runs none of them: a middleware added to MIDDLEWARE later (CORS, a request id,
# metrics) would silently skip every purchase, so the handler refuses to start while
# MIDDLEWARE differs from this list. Add its work here, then its name.
MIRRORED_MIDDLEWARE = (
    "common.middleware.RequestIdMiddleware",  # request_named, X-Request-ID
    "common.middleware.ArrivalStampMiddleware",  # stamp_arrival
    "django.middleware.security.SecurityMiddleware",  # its redirect and headers
    "django.contrib.sessions.middleware.SessionMiddleware",  # left out: no session read
    "django.middleware.common.CommonMiddleware",  # the host check and Content-Length
    "django.middleware.csrf.CsrfViewMiddleware",  # left out: the view is CSRF-exempt
    "django.contrib.auth.middleware.AuthenticationMiddleware",  # left out: no user read
    "django.contrib.messages.middleware.MessageMiddleware",  # left out: no messages
    "django.middleware.clickjacking.XFrameOptionsMiddleware",  # X-Frame-Options
    "common.middleware.ApplicationErrorMiddleware",  # error_response, as the shortcut answers
)


def shortcut_drift() -> str | None:
    """What differs between ``settings.MIDDLEWARE`` and the list the shortcut mirrors;
    None when nothing does."""
    if tuple(settings.MIDDLEWARE) == MIRRORED_MIDDLEWARE:
        return None
    added = [m for m in settings.MIDDLEWARE if m not in MIRRORED_MIDDLEWARE]
    gone = [m for m in MIRRORED_MIDDLEWARE if m not in settings.MIDDLEWARE]
    return f"added {added}, removed {gone}" if added or gone else "the same middleware in another order"


class PurchaseWSGIHandler(WSGIHandler):
    """Django's WSGI handler, with the sale's plain purchases answered by
    ``purchase_shortcut`` instead of the middleware chain.

    :raises ImproperlyConfigured: the shortcut is on and ``MIDDLEWARE`` is not the list
        it mirrors (``MIRRORED_MIDDLEWARE``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if settings.FLASHSALE_PURCHASE_SHORTCUT and (drift := shortcut_drift()):
            raise ImproperlyConfigured(
                f"MIDDLEWARE differs from what the purchase's shortcut mirrors ({drift}): a purchase "
                "answered by the shortcut would skip it. Mirror it in orders.wsgi and add it to "
                "MIRRORED_MIDDLEWARE, or set FLASHSALE_PURCHASE_SHORTCUT=false.")
        super().__init__(*args, **kwargs)

    def get_response(self, request: HttpRequest) -> HttpResponseBase:
        request_started()
        try:
            return self._answer(request)
        finally:
            request_ended()

    def _answer(self, request: HttpRequest) -> HttpResponseBase:
        response = purchase_shortcut(request, self._shortcut)
        if response is None:
            return super().get_response(request)
        # What Django's get_response does around its chain.
        response._resource_closers.append(request.close)  # type: ignore[attr-defined]  # unstubbed
        if response.status_code >= 400:
            log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request)
        return response

    @cached_property
    def _shortcut(self) -> _Shortcut:
        return _Shortcut()


class _Shortcut:
    """What the shortcut needs, built once a process: the purchase's path, its view's
    renderer and headers, and the middleware whose work on an answer it repeats."""

    def __init__(self) -> None:
        self.path = reverse("order-create")
        self.view = OrderCreateApi()
        [renderer_class] = OrderCreateApi.renderer_classes
        self.renderer = renderer_class()
        self.headers = self.view.default_response_headers  # Allow (and Vary, with more renderers)
        self.security = SecurityMiddleware(_never)
        self.frames = XFrameOptionsMiddleware(_never)


def _never(request: HttpRequest) -> NoReturn:
    raise AssertionError("the shortcut calls its middleware's hooks only")


def purchase_shortcut(request: HttpRequest, shortcut: _Shortcut) -> HttpResponse | None:
    """The answer to a plain JSON purchase, as Django's path would give it; None for
    any other request (Django's path answers it)."""
    if (request.method != "POST" or request.path_info != shortcut.path
            or not settings.FLASHSALE_PURCHASE_SHORTCUT):
        return None
    arrived = time.time()
    # DRF's throttles read the buyer and the body off a DRF Request (``user``, ``data``):
    # set on Django's, which stands for it.
    drf: Any = request
    if settings.FLASHSALE_BUYER_AUTH:
        buyer = _bearer(request)
        purchase = plain_purchase(_plain_json(request), by_credentials=True) if buyer else None
        if buyer and purchase is not None:
            drf.user = TokenBuyer(buyer)
            purchase = {**purchase, "user_id": buyer}
    else:
        purchase = plain_purchase(_plain_json(request))
    if purchase is None or not _allowed(request, shortcut):
        return None
    name = request_named(request)
    drf.data = purchase
    answer: tuple[dict[str, Any], int, dict[str, str]] | None
    try:
        shortcut.view.check_throttles(drf)  # DRF's own: 429 with the longest wait
        answer = purchase_answer(request, purchase)
        response = _rendered(shortcut, *answer)
    except Exception as exc:
        answer = error_response(exc)
        response = response_for_exception(request, exc) if answer is None else _rendered(shortcut, *answer)
    purchase_counted(sku=purchase["sku"], body=None if answer is None else answer[0],
                     status=response.status_code, arrived=arrived)
    # What the middleware adds to an answer: CommonMiddleware its length, then the
    # security headers, the frame option and the arrival stamp.
    if not response.has_header("Content-Length"):
        response["Content-Length"] = str(len(response.content))
    response = shortcut.security.process_response(request, response)
    response = shortcut.frames.process_response(request, response)
    response["X-Request-ID"] = name
    return stamp_arrival(response, arrived)


def _rendered(shortcut: _Shortcut, body: dict[str, Any], status: int,
              headers: dict[str, str]) -> HttpResponse:
    """The view's answer, as DRF's ``Response`` renders and finalizes it."""
    response = HttpResponse(shortcut.renderer.render(body, shortcut.renderer.media_type), status=status,
                            content_type=shortcut.renderer.media_type)
    for name, value in {**headers, **shortcut.headers}.items():
        response[name] = value
    return response


def _plain_json(request: HttpRequest) -> object:
    """The body's value, for a UTF-8 JSON body that decodes as DRF's parser decodes
    it (no NaN or Infinity); else None."""
    if request.content_type != "application/json":
        return None
    if (request.content_params or {}).get("charset", "utf-8").lower() not in _UTF8:
        return None
    try:
        return json.loads(request.body.decode("utf-8"))
    except (ValueError, RecursionError, RequestDataTooBig):
        return None  # Django's path says what is wrong, in its words


def _bearer(request: HttpRequest) -> str | None:
    """The buyer a valid ``Authorization: Bearer`` token names; None for anything
    else (no header, another scheme, a refused token: Django's path answers it)."""
    try:
        return bearer_buyer(request.META.get("HTTP_AUTHORIZATION", ""))
    except TokenRefused:
        return None


def _allowed(request: HttpRequest, shortcut: _Shortcut) -> bool:
    """Whether the middleware lets the request through to a view: its host is an
    allowed one (CommonMiddleware asks), and it needs no HTTPS redirect."""
    try:
        request.get_host()
    except DisallowedHost:
        return False
    return shortcut.security.process_request(request) is None

