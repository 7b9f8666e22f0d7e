"""The one business-error hierarchy, and the one JSON error shape it maps to.

Every error a client can see leaves as ``{"error": <code>, "message": <text>,
...extra}``; ``error_response`` below is the only place that shapes it (DRF's
exception handler and the purchase's shortcut, ``orders.wsgi``, answer with it).
"""

from __future__ import annotations

import inspect
import logging
import math
from collections import defaultdict
from typing import Any, NamedTuple

from django.db import DatabaseError
from django.http import Http404, HttpRequest, JsonResponse
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from .database_errors import database_gave_up, database_unreachable

logger = logging.getLogger(__name__)


class ApplicationError(Exception):
    status_code: int = status.HTTP_400_BAD_REQUEST
    code = "error"
    # Seconds after which a retry may succeed (the Retry-After header); None: it won't.
    retry_after: int | None = None

    def __init__(self, message: str, *, extra: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra or {}
        self.headers = headers or {}
        retry_after = self.retry_after if retry_after is None else retry_after
        if retry_after is not None:
            self.headers.setdefault("Retry-After", str(retry_after))


class InvalidInput(ApplicationError):
    """The request is malformed (``fields`` names what is wrong); nothing was written."""

    status_code = status.HTTP_400_BAD_REQUEST
    code = "invalid"


class NotFound(ApplicationError):
    """No such product or order."""

    status_code = status.HTTP_404_NOT_FOUND
    code = "not_found"


class SoldOut(ApplicationError):
    """The stock is gone; nothing was written."""

    status_code = status.HTTP_409_CONFLICT
    code = "sold_out"

    @classmethod
    def short_of(cls, sku: str, requested: int, remaining: int) -> SoldOut:
        """``requested`` units asked for where ``remaining`` were left."""
        return cls(f"{sku}: {requested} requested, {remaining} left",
                   extra={"sku": sku, "requested": requested, "remaining": remaining})


class NotStarted(ApplicationError):
    """The sale opens at ``starts_at``; Retry-After is the seconds until then. Nothing
    was written."""

    status_code = status.HTTP_409_CONFLICT
    code = "not_started"


class Ended(ApplicationError):
    """The sale closed at ``ends_at``; nothing was written."""

    status_code = status.HTTP_409_CONFLICT
    code = "ended"


class IdempotencyConflict(ApplicationError):
    """The key was used before with a different request body."""

    status_code = status.HTTP_409_CONFLICT
    code = "idempotency_conflict"


class Busy(ApplicationError):
    """The lock (or an in-flight request with the same key) did not free up in time;
    the client may retry after ``retry_after`` seconds."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    code = "busy"
    retry_after = 1


class Unavailable(ApplicationError):
    """A server the purchase needs (named in ``backend``) cannot be reached; nothing
    was written. The client may retry after ``retry_after`` seconds."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    code = "unavailable"
    retry_after = 1

    def __init__(self, message: str, *, backend: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.extra.setdefault("backend", backend)


class OutcomeUnknown(ApplicationError):
    """The connection died during the COMMIT (or, for the gate, the script's reply
    was lost): whether the order was placed is unknown here. A retry with the same
    Idempotency-Key finds the truth."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    code = "outcome_unknown"
    retry_after = 1

    def __init__(self, message: str, *, order_id: int | None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        # The order the commit carried, if it landed (not in the body); None when not known.
        self.order_id = order_id


class UsernameTaken(ApplicationError):
    """Another buyer has this username."""

    status_code = status.HTTP_409_CONFLICT
    code = "username_taken"


class CredentialsRefused(ApplicationError):
    """A username and password that do not sign anyone in."""

    status_code = status.HTTP_401_UNAUTHORIZED
    code = "authentication_failed"

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, headers={"WWW-Authenticate": "Bearer"}, **kwargs)


class SignInLocked(ApplicationError):
    """Too many failed sign-ins from this client or for this username: wait
    Retry-After seconds; the password was not checked.

    ``buyers.lockout`` counts them."""

    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    code = "throttled"


class ChallengeRefused(ApplicationError):
    """This door asks for proof of work first (a new account, a waiting room's place):
    no solution, or one that does not hold (``reason``: missing, invalid,
    other_purpose, too_easy, expired, unsolved, used). Ask for a challenge, solve it,
    send ``Challenge-Solution``. Nothing was written."""

    status_code = status.HTTP_403_FORBIDDEN
    code = "challenge_refused"

    @classmethod
    def because(cls, reason: str, purpose: str) -> ChallengeRefused:
        return cls(f"proof of work for {purpose}: {reason}", extra={"reason": reason, "purpose": purpose})


class LimitReached(ApplicationError):
    """The buyer already bought the most one buyer may of this product."""

    status_code = status.HTTP_409_CONFLICT
    code = "limit_reached"

    @classmethod
    def of(cls, sku: str, user_id: str, limit: int) -> LimitReached:
        return cls(f"{user_id} may buy at most {limit} of {sku}", extra={"sku": sku, "limit": limit})


class PlacesBounded(ApplicationError):
    """The address took as many places in the sale's waiting room as one may
    (``FLASHSALE_ROOM_PLACES_PER_ADDRESS``); nothing was taken."""

    status_code = status.HTTP_409_CONFLICT
    code = "places_bounded"


class AdmissionRefused(ApplicationError):
    """The sale has a waiting room, and the purchase carries no admission that buys:
    none, or one forged, expired, another buyer's or sale's, or spent on another
    purchase (``reason`` says which). Nothing was written."""

    status_code = status.HTTP_403_FORBIDDEN
    code = "admission_refused"


class NotPayable(ApplicationError):
    """The order waits for no payment: paid already, expired, or of a sale without a
    payment step (``status`` says which). Nothing was charged."""

    status_code = status.HTTP_409_CONFLICT
    code = "not_payable"


class PaymentDeclined(ApplicationError):
    """The provider declined the payment (``decline_code`` says why, as it did); the
    order still waits for one until it expires."""

    status_code = status.HTTP_402_PAYMENT_REQUIRED
    code = "payment_declined"


class StockChanged(Busy):
    """An optimistic write found the stock row changed since it was read. The
    purchase retries with fresh data; past the retry budget this is the 503."""


class SaleReplaced(Busy):
    """The sale was reset while this purchase was under way: it took nothing, from
    the old sale or the new one, and nothing was written. A retry meets the new
    sale and its terms."""

    @classmethod
    def of(cls, sku: str) -> SaleReplaced:
        return cls(f"{sku} was reset during the purchase: it took nothing from the new sale, and nothing "
                   "was written", extra={"sku": sku})


class StaleLock(Busy):
    """The stock lock expired before this purchase touched the stock, and a newer
    holder has touched it since: the fencing token was refused, and nothing of the
    purchase was kept. The client may retry."""

    code = "stale_lock"


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": code, "message": message, **extra}


# The shape above, as the OpenAPI schema documents every error answer.
ErrorSerializer = inline_serializer("Error", {"error": serializers.CharField(),
                                              "message": serializers.CharField()})


class DocumentedError(NamedTuple):
    """An error answer that is not one of the classes above: DRF's own (throttled,
    authentication) and nginx's (a body too large, no instance, a timeout)."""

    status_code: int
    code: str
    meaning: str


THROTTLED = DocumentedError(429, "throttled",
                            "Too many requests from one buyer or address: wait Retry-After seconds.")
NOT_AUTHENTICATED = DocumentedError(401, "not_authenticated",
                                    "No admin token (a wrong one: authentication_failed).")
PERMISSION_DENIED = DocumentedError(403, "permission_denied", "Authenticated, but not as the admin.")
NO_BUYER = DocumentedError(401, "not_authenticated", "No buyer's credentials (a bearer token, or the page's "
                           "session); a forged, altered or expired token: authentication_failed.")
NO_CSRF = DocumentedError(403, "permission_denied", "The page's session without its CSRF token.")
UNSUPPORTED_MEDIA_TYPE = DocumentedError(415, "unsupported_media_type", "The body is not application/json.")
# nginx's answers (nginx/nginx.conf.template), in the same shape.
TOO_LARGE = DocumentedError(413, "too_large", "nginx: a body larger than 16 KB; nothing was written.")
NO_INSTANCE = DocumentedError(502, "unavailable", "nginx: no app instance answered (backend: app); retry "
                              "with the same Idempotency-Key to learn whether a purchase went through.")
TIMED_OUT = DocumentedError(504, "timeout", "nginx: the app instance did not answer in time; retry with the "
                            "same Idempotency-Key to learn whether a purchase went through.")


def _documented(error: type[ApplicationError] | DocumentedError) -> DocumentedError:
    if isinstance(error, DocumentedError):
        return error
    meaning = " ".join((inspect.getdoc(error) or "").split("\n\n")[0].split())
    return DocumentedError(error.status_code, error.code, meaning)


def error_responses(*errors: type[ApplicationError] | DocumentedError) -> dict[int, OpenApiResponse]:
    """The schema's error responses of an operation: one per status, its description
    naming each ``error`` code it may carry and what it means, with an example each,
    so that a client reads in the schema what it must handle."""
    by_status: dict[int, list[DocumentedError]] = defaultdict(list)
    for documented in map(_documented, errors):
        by_status[documented.status_code].append(documented)
    return {
        status_code: OpenApiResponse(
            ErrorSerializer,
            description="\n".join(f"- `{a.code}`: {a.meaning}" for a in answers),
            examples=[OpenApiExample(a.code, value=error_body(a.code, a.meaning), response_only=True,
                                     status_codes=[status_code]) for a in answers],
        )
        for status_code, answers in sorted(by_status.items())
    }


class ErrorResponse(NamedTuple):
    """An error's answer: its JSON body, its status and its headers."""

    body: dict[str, Any]
    status: int
    headers: dict[str, str]


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's EXCEPTION_HANDLER: business errors and DRF's own, one shape. Like DRF's
    own handler, it marks an open atomic request for rollback before answering."""
    answer = error_response(exc)
    if answer is None:
        return None
    set_rollback()
    return Response(answer.body, status=answer.status, headers=answer.headers)


def _answer(exc: ApplicationError) -> ErrorResponse:
    if exc.__cause__ is not None and exc.status_code >= 500:
        # What failed underneath (hosts, ports, users) is the operator's to read,
        # never the client's.
        logger.warning("%s %s: %s (%s: %s)", exc.status_code, exc.code, exc.message,
                       type(exc.__cause__).__name__, exc.__cause__)
    return ErrorResponse(error_body(exc.code, exc.message, **exc.extra), exc.status_code, exc.headers)


def error_json(error: ApplicationError) -> JsonResponse:
    """``error`` in the API's JSON shape, for a plain Django view (no DRF)."""
    answer = _answer(error)
    return JsonResponse(answer.body, status=answer.status, headers=answer.headers)


def error_response(exc: Exception) -> ErrorResponse | None:
    """The answer to ``exc`` (``exception_handler`` makes it a DRF ``Response``);
    None for an unexpected one: Django's 500 handler answers it."""
    if isinstance(exc, DatabaseError):
        # Any view's; the purchase says more, in its own words (order_create).
        exc = database_failure(exc, then="retry") or exc
    if isinstance(exc, ApplicationError):
        return _answer(exc)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    if isinstance(exc, exceptions.APIException):
        headers = {}
        if auth_header := getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = auth_header
        if wait := getattr(exc, "wait", None):
            headers["Retry-After"] = str(math.ceil(wait))  # whole seconds, never 0 too early
        if exc.status_code == status.HTTP_400_BAD_REQUEST:
            # Malformed JSON (ParseError) and failed validation are both "invalid".
            extra = {"fields": exc.detail} if isinstance(exc, exceptions.ValidationError) else {}
            message = "request is invalid" if extra else str(exc.detail)
            return ErrorResponse(error_body("invalid", message, **extra), 400, {})
        return ErrorResponse(error_body(exc.default_code, str(exc.detail)), exc.status_code, headers)
    return None


def database_failure(exc: DatabaseError, *, then: str) -> ApplicationError | None:
    """The answer to a database failure that a retry may mend: the server cannot be
    reached (503 ``unavailable``), or it gave up waiting for a row lock or broke a
    deadlock (503 ``busy``); ``None`` for anything else (a 500). ``then`` ends the
    message: what the caller knows of its writes, or what the client should do."""
    if database_unreachable(exc):
        return Unavailable(f"the database cannot be reached; {then}", backend="database")
    if database_gave_up(exc):
        return Busy(f"the database gave up waiting for a row lock (or broke a deadlock); {then}")
    return None


def handler404(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(error_body("not_found", "no such page"), status=404)


def handler500(request: HttpRequest) -> JsonResponse:
    return JsonResponse(error_body("server_error", "internal server error"), status=500)
