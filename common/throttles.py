"""DRF throttles whose rate is a setting and whose counts live in the shared Redis
cache, so every instance counts the same requests. When Redis cannot be reached,
requests pass: a throttle protects the sale; it must not stop it."""

from __future__ import annotations

import logging

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from common.cache_errors import CACHE_ERRORS

logger = logging.getLogger(__name__)


class RateFromSettings(SimpleRateThrottle):
    """Its rate the setting ``rate_setting`` names (DRF's ``"<n>/<s|m|h|d>"``; empty: off)."""

    rate_setting = ""

    def get_rate(self) -> str | None:
        return getattr(settings, self.rate_setting) or None

    def allow_request(self, request, view) -> bool:
        try:
            return super().allow_request(request, view)
        except CACHE_ERRORS as e:
            logger.warning("%s: Redis unreachable, not throttling: %s", self.scope, e)
            return True


class PerAddress(RateFromSettings):
    """Counted per client address."""

    def get_cache_key(self, request, view) -> str | None:
        # The client's address as nginx saw it (REST_FRAMEWORK["NUM_PROXIES"]).
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
