"""Throttles, counted in the shared Redis cache, so every instance counts the same
requests. The purchase endpoint's, per buyer (its credentials', or without
``FLASHSALE_BUYER_AUTH`` the body's ``user_id``) and per client
address: a throttled purchase is answered 429 with ``Retry-After`` before it claims a
key or reads the stock. And the admin token's failures per client address
(``orders.auth``), counted only when a token was wrong.

Rates come from settings (``FLASHSALE_THROTTLE_USER``, ``FLASHSALE_THROTTLE_ADDRESS``,
``FLASHSALE_ADMIN_FAILURES``, DRF's ``"<n>/<s|m|h|d>"``); empty turns one off: the
local stack does for the purchase's, since its load tests send everything from one
address. When Redis cannot be reached, requests pass: a throttle protects the sale;
it must not stop it.
"""

from __future__ import annotations

import logging

from django.conf import settings
from rest_framework.request import Request
from rest_framework.views import APIView

from buyers.authentication import buyer_name
from common.throttles import FailureBudget, PerAddress, RateFromSettings

logger = logging.getLogger(__name__)


class PurchaseUserThrottle(RateFromSettings):
    scope = "purchase-user"
    rate_setting = "FLASHSALE_THROTTLE_USER"

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        if settings.FLASHSALE_BUYER_AUTH:
            user_id = buyer_name(getattr(request, "user", None))  # the credentials' buyer
        else:
            data = request.data
            user_id = data.get("user_id") if isinstance(data, dict) else None
        if not isinstance(user_id, str) or not user_id:
            return None  # nobody to count: the view answers 400 (or 401)
        return self.cache_format % {"scope": self.scope, "ident": user_id[:64]}


class PurchaseAddressThrottle(PerAddress):
    scope = "purchase-address"
    rate_setting = "FLASHSALE_THROTTLE_ADDRESS"


class AdminTokenFailureThrottle(FailureBudget):
    """Wrong admin tokens per client address (``ident``: its bucket): ``orders.auth``
    counts only a failure, so a right token never counts."""

    scope = "admin-token-failures"
    rate_setting = "FLASHSALE_ADMIN_FAILURES"
