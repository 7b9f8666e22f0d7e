"""Who buys: ``Authorization: Bearer <token>`` (``buyers.tokens``) for API clients,
read without a database query; the shop page signs its buyer in with a session
(DRF's ``SessionAuthentication``, which checks the CSRF token)."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from .tokens import TokenRefused, token_buyer


class TokenBuyer:
    """The buyer a bearer token names: no row read."""

    is_authenticated = True
    is_active = True
    is_staff = False

    def __init__(self, username: str):
        self.username = username

    def __str__(self) -> str:
        return self.username


class BuyerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None  # not ours: a session may say who it is
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("the Authorization header is `Bearer <token>`")
        try:
            return TokenBuyer(token_buyer(header[1].decode("ascii"))), None
        except (TokenRefused, UnicodeDecodeError) as e:
            raise exceptions.AuthenticationFailed(f"the buyer's token is refused: {e}") from e

    def authenticate_header(self, request) -> str:
        # Makes DRF answer 401 (not 403) to a request with no credentials.
        return self.keyword


class BuyerTokenScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema describes ``BuyerTokenAuthentication``."""

    target_class = BuyerTokenAuthentication
    name = "buyerToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
                "description": "a buyer's token: `POST /api/buyers` or `POST /api/buyers/token`"}


def buyer_name(user) -> str | None:
    """The buyer's name of an authenticated request's user, or None (nobody, or the
    admin token, which is no buyer)."""
    if not getattr(user, "is_authenticated", False) or getattr(user, "username", "") == "admin-token":
        return None
    return user.username
