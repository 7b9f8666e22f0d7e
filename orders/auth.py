"""Admin access for the operator's endpoints (reset, races): a shared token or a staff
session, and the log line each admin action leaves.

A wrong token is logged with the client's address and counted per address in the
shared cache. An address that has spent ``FLASHSALE_ADMIN_FAILURES`` (DRF's
``"<n>/<period>"``, 10 a minute by default) is answered 429 with ``Retry-After``
before its token is compared at all, the right one included: a guesser learns
nothing more until the period has passed, and an operator who mistyped that often
waits the same (or comes from another address).
"""

from __future__ import annotations

import hmac
import logging
from typing import TYPE_CHECKING, NoReturn

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from common.throttles import client_bucket

from .throttles import AdminTokenFailureThrottle

if TYPE_CHECKING:
    from drf_spectacular.openapi import AutoSchema

logger = logging.getLogger(__name__)


class AdminTokenUser:
    """Who a request is when it carries the admin token: staff, and nobody in the DB."""

    is_authenticated = True
    is_active = True
    is_staff = True
    username = "admin-token"

    def __str__(self) -> str:
        return self.username


class AdminTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Token <FLASHSALE_ADMIN_TOKEN>``."""

    keyword = "Token"

    def authenticate(self, request: Request) -> tuple[AdminTokenUser, None] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None  # not ours: let session authentication try
        failures = AdminTokenFailureThrottle(client_bucket(request))
        if failures.spent():
            raise exceptions.Throttled(wait=failures.wait())
        expected = settings.FLASHSALE_ADMIN_TOKEN
        if len(header) != 2 or not expected:
            self._refuse(request, "invalid token header")
        if not hmac.compare_digest(header[1], expected.encode()):
            self._refuse(request, "invalid token")
        return AdminTokenUser(), None

    @staticmethod
    def _refuse(request: Request, reason: str) -> NoReturn:
        throttle = AdminTokenFailureThrottle(client_bucket(request))
        logger.warning("admin token refused (%s) from %s", reason, client_address(request))
        # Counts this failure (Redis gone: refused all the same, not counted).
        if not throttle.failed():
            raise exceptions.Throttled(wait=throttle.wait())
        raise exceptions.AuthenticationFailed(reason)

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) to a request with no credentials.
        return self.keyword


class AdminTokenScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema describes ``AdminTokenAuthentication`` (drf-spectacular
    finds it by ``target_class`` once this module is imported, as the views do)."""

    target_class = AdminTokenAuthentication
    name = "adminToken"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Token <FLASHSALE_ADMIN_TOKEN>`: the stack writes it to "
                               ".run/admin-token"}


def client_address(request: Request) -> str:
    """The client's address as the first trusted proxy saw it (REST_FRAMEWORK's
    NUM_PROXIES), as the throttles count it."""
    return BaseThrottle().get_ident(request)


def log_admin_action(request: Request, action: str, **details: object) -> None:
    """One line per admin action: what, with what, by whom, from where."""
    told = " ".join(f"{name}={value!r}" for name, value in details.items())
    client = client_address(request)
    logger.info("admin %s %s by %s from %s", action, told, request.user, client,
                extra={"action": action, "details": {k: str(v) for k, v in details.items()},
                       "user": str(request.user), "client": client})


class IsStaff(permissions.BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        return bool(request.user and request.user.is_authenticated and request.user.is_staff)
