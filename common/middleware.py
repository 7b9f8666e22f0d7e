"""Middleware of the whole site."""

from __future__ import annotations

import time

from .requestlog import request_named


class RequestIdMiddleware:
    """Name the request for the log lines it causes (``common.requestlog``) and answer
    with the name (``X-Request-ID``). First in the chain: every line is named."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
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

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        arrived = request.arrived = time.time()  # also for the views' metrics
        return stamp_arrival(self.get_response(request), arrived)


def stamp_arrival(response, arrived: float):
    """Add ``arrived`` (epoch seconds) to ``response``'s ``Server-Timing``, last. The
    purchase's shortcut (``orders.wsgi``), which answers before this middleware, stamps
    its answers with it too."""
    stamp = f"arrival;desc={arrived:.6f}"
    timing = response.headers.get("Server-Timing")
    response.headers["Server-Timing"] = f"{timing}, {stamp}" if timing else stamp
    return response
