"""Middleware of the whole site."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from django.http import HttpRequest, HttpResponse, HttpResponseBase

from .errors import ApplicationError, error_json
from .requestlog import request_named

R = TypeVar("R", bound=HttpResponseBase)
# Where a request carries when it arrived (epoch seconds), beside the server's own keys.
ARRIVED = "flashsale.arrived"


class RequestIdMiddleware:
    """Name the request for the log lines it causes (``common.requestlog``) and answer
    with the name (``X-Request-ID``). First in the chain: every line is named."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        name = request_named(request)
        response = self.get_response(request)
        response["X-Request-ID"] = name
        return response


class ArrivalStampMiddleware:
    """Stamp every answer with when its request reached this instance:
    ``Server-Timing: arrival;desc=<epoch seconds>``, in microseconds.

    First in the chain, so the stamp is the request's first line here. Every instance
    of the stack runs on one host, one clock: a load test ranks purchases by it to see
    who was served in what order (the FIFO score of ``make compare``). nginx's
    ``X-Request-Start`` has milliseconds only, and a sale has many arrivals in each.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        arrived = request.META[ARRIVED] = time.time()  # also for the views' metrics
        return stamp_arrival(self.get_response(request), arrived)


def stamp_arrival(response: R, arrived: float) -> R:
    """Add ``arrived`` (epoch seconds) to ``response``'s ``Server-Timing``, last. The
    purchase's shortcut (``orders.wsgi``), which answers before this middleware, stamps
    its answers with it too."""
    stamp = f"arrival;desc={arrived:.6f}"
    timing = response.headers.get("Server-Timing")
    response.headers["Server-Timing"] = f"{timing}, {stamp}" if timing else stamp
    return response


class ApplicationErrorMiddleware:
    """A page's business error (``common.errors``) answered as the API answers it:
    its status, its headers and the JSON shape, where Django would answer 500. The
    API's views answer theirs themselves (DRF's exception handler); this is for the
    rest: the admin's, the shop's forms. Last in the chain: the view's own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        return error_json(exc) if isinstance(exc, ApplicationError) else None
