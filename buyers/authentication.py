"""Who buys: ``Authorization: Bearer <token>`` (``buyers.tokens``) for API clients,
read without a database query; the shop page signs its buyer in with a session
(DRF's ``SessionAuthentication``, which checks the CSRF token)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from .tokens import TokenRefused, token_buyer

if TYPE_CHECKING:
    from drf_spectacular.openapi import AutoSchema


class TokenBuyer:
    """The buyer a bearer token names: no row read."""

    is_authenticated = True
    is_active = True
    is_staff = False

    def __init__(self, username: str) -> None:
        self.username = username

    def __str__(self) -> str:
        return self.username


class BuyerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[TokenBuyer, None] | None:
        try:
            buyer = bearer_buyer(authentication.get_authorization_header(request).decode("latin-1"))
        except TokenRefused as e:
            raise exceptions.AuthenticationFailed(f"the buyer's token is refused: {e}") from e
        return None if buyer is None else (TokenBuyer(buyer), None)  # None: a session may say who it is

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) to a request with no credentials.
        return self.keyword


class BuyerTokenScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema describes ``BuyerTokenAuthentication``."""

    target_class = BuyerTokenAuthentication
    name = "buyerToken"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
                "description": "a buyer's token: `POST /api/buyers` or `POST /api/buyers/token`"}


def bearer_buyer(header: str) -> str | None:
    """The buyer an ``Authorization`` header's bearer token names; None when it is no
    bearer token (none, or another scheme). The purchase's shortcut (``orders.wsgi``)
    and ``BuyerTokenAuthentication`` read the header alike.

    :raises TokenRefused: a bearer header that is not ``Bearer <token>``, or whose
        token is refused.
    """
    parts = header.split()
    if not parts or parts[0].lower() != "bearer":
        return None
    if len(parts) != 2:
        raise TokenRefused("the Authorization header is `Bearer <token>`")
    return token_buyer(parts[1])


def buyer_name(user: Any) -> str | None:
    """The buyer's name of an authenticated request's user, or None (nobody)."""
    # request.user: a TokenBuyer, the session's User, or AnonymousUser.
    return str(user.username) if getattr(user, "is_authenticated", False) else None


class IsBuyer(permissions.BasePermission):
    """A buyer's credentials: a bearer token, or the page's session."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return buyer_name(request.user) is not None


class BuyerView:
    """A view a buyer calls for itself (a mixin, before ``APIView``): with
    ``FLASHSALE_BUYER_AUTH``, the buyer its bearer token or the page's session names
    (DRF checks the session's CSRF token), and nobody else; without it, no credentials
    are read, and the body names the buyer."""

    def get_authenticators(self) -> list[BaseAuthentication]:
        return [BuyerTokenAuthentication(), SessionAuthentication()] if settings.FLASHSALE_BUYER_AUTH else []

    def get_permissions(self) -> list[BasePermission]:
        return [IsBuyer()] if settings.FLASHSALE_BUYER_AUTH else []
