"""DRF throttles whose rate is a setting and whose counts live in the shared Redis
cache, so every instance counts the same requests. When Redis cannot be reached,
requests pass: a throttle protects the sale; it must not stop it.

What is counted per address is counted per client: an IPv4 address, or an IPv6 /64,
the least a network hands one subscriber (whoever holds a /64 holds 2^64 addresses,
and would otherwise have as many buckets)."""

from __future__ import annotations

import ipaddress
import logging
from typing import cast

from django.conf import settings
from django.http import HttpRequest
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle
from rest_framework.views import APIView

from common.cache_errors import CACHE_ERRORS

logger = logging.getLogger(__name__)


class RateFromSettings(SimpleRateThrottle):
    """Its rate the setting ``rate_setting`` names (DRF's ``"<n>/<s|m|h|d>"``; empty: off)."""

    rate_setting = ""
    # Set by SimpleRateThrottle from the rate (None while it is off); its stubs omit them.
    num_requests: int | None
    duration: int | None

    def get_rate(self) -> str | None:
        return getattr(settings, self.rate_setting) or None

    # Also asked outside a DRF view: by a Django view (a page's sign-up), and with no
    # request at all by a budget (FailureBudget), whose key names its subject.
    def allow_request(self, request: Request | HttpRequest | None, view: APIView | None) -> bool:
        try:
            return super().allow_request(request, view)  # type: ignore[arg-type]
        except CACHE_ERRORS as e:
            logger.warning("%s: Redis unreachable, not throttling: %s", self.scope, e)
            return True


def bucket(address: str) -> str:
    """The client ``address`` counts as: itself (IPv4, or an IPv4 client of an IPv6
    socket), else its IPv6 /64; anything else as it came."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 4:
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ipaddress.IPv6Network((ip, 64), strict=False))


def client_bucket(request: Request | HttpRequest) -> str:
    """The request's client as the per-address counts see it: the address nginx saw
    (REST_FRAMEWORK["NUM_PROXIES"]), bucketed."""
    return bucket(BaseThrottle().get_ident(cast(Request, request)))  # it reads META alone, which both have


class PerAddress(RateFromSettings):
    """Counted per client (``bucket``)."""

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": client_bucket(request)}


class FailureBudget(RateFromSettings):
    """Failures of one subject (``ident``: an address's bucket, an order, a buyer) in
    the rate's period. Asked before a try (``spent``, counting nothing) and told of a
    failed one (``failed``): what succeeds never counts, so a budget stops a guesser
    and not a user."""

    def __init__(self, ident: str) -> None:
        super().__init__()
        self.ident = ident

    def get_cache_key(self, request: Request | None, view: APIView | None) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.ident}

    def spent(self) -> bool:
        """Whether the failures have used the budget up (Redis gone: not spent, as a
        throttle never stops the sale). ``wait()`` after it says until when."""
        if self.num_requests is None or self.duration is None:  # no rate: off
            return False
        self.key = self.get_cache_key(None, None)
        try:
            history = self.cache.get(self.key, [])
        except CACHE_ERRORS as e:
            logger.warning("%s: Redis unreachable, not throttling: %s", self.scope, e)
            return False
        self.now = self.timer()
        self.history = [t for t in history if t > self.now - self.duration]
        return len(self.history) >= self.num_requests

    def failed(self) -> bool:
        """Counts a failure; False when the budget was spent already (``wait()`` says
        until when)."""
        return self.allow_request(None, None)
