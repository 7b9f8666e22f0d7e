"""The orders JSON API: purchases and an order (a sale's audit and reset:
``orders.sales_apis``). Each view parses, calls one service or selector, and
answers; errors leave through ``common.errors.exception_handler``."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, cast

from django.conf import settings
from django.http import HttpRequest
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from rest_framework import permissions, serializers, status
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from buyers.authentication import BuyerTokenAuthentication, BuyerView, buyer_name
from common.errors import (
    NO_BUYER,
    NO_CSRF,
    NO_INSTANCE,
    THROTTLED,
    TIMED_OUT,
    TOO_LARGE,
    UNSUPPORTED_MEDIA_TYPE,
    AdmissionRefused,
    Busy,
    Ended,
    IdempotencyConflict,
    InvalidInput,
    LimitReached,
    NotFound,
    NotStarted,
    OutcomeUnknown,
    SoldOut,
    StaleLock,
    Unavailable,
    error_responses,
)
from common.fields import ClosedInputSerializer, StrictCharField
from common.keys import KEY_SENT, key_scoped
from common.middleware import ARRIVED
from inventory.limits import SKU_MAX_LENGTH

from .auth import AdminTokenAuthentication
from .metrics import purchase_counted
from .models import Order
from .purchase import order_create
from .results import OrderResult, Timings
from .selectors import order_status_get
from .throttles import PurchaseAddressThrottle, PurchaseUserThrottle

USER_ID_MAX_LENGTH = 64

_IDEMPOTENCY_KEY = KEY_SENT


def _received_at(request: Request | HttpRequest) -> float | None:
    """When nginx received the request (``X-Request-Start: t=<epoch seconds>``, which
    nginx writes over anything a client sent); never later than now, None without it."""
    # META, not ``request.headers`` (built from every header on first use): the
    # purchase path reads two headers, and it is the hot path.
    value = request.META.get("HTTP_X_REQUEST_START", "")
    try:
        received = float(value.removeprefix("t="))
    except ValueError:
        return None
    return min(received, time.time()) if math.isfinite(received) else None


def _server_timing(timings: Timings | None) -> dict[str, str]:
    # The W3C Server-Timing header: the load tools read the lock wait and the hold
    # time of every purchase from it, as measured here, not guessed from outside.
    if timings is None:  # a replay: nothing was timed
        return {}
    return {"Server-Timing": f"lock-wait;dur={timings.lock_wait_ms:.3f}, hold;dur={timings.hold_ms:.3f}"}


ORDER_STATUSES = ("accepted", "confirmed", "dead_lettered")


# Of an OrderResult, or an OrderStatus (OrderDetailSerializer); Any, since its field
# ``instance`` (the app's) stands where the stubs type the serializer's own.
class OrderSerializer(serializers.Serializer[Any]):
    """An order as its buyer sees it."""

    order_id = serializers.IntegerField()
    sku = serializers.CharField()
    quantity = serializers.IntegerField()
    strategy = serializers.CharField()
    instance = serializers.CharField()
    # "confirmed": in the database; under the gate, "accepted" (on its way there) or
    # "dead_lettered" (the persisters could not write it).
    status = serializers.ChoiceField(choices=ORDER_STATUSES)


class OrderDetailSerializer(OrderSerializer):
    """An order as its buyer follows it, with its payment step."""

    # Null while the order is not in the database yet (the gate's stream carries it).
    payment_status = serializers.ChoiceField(choices=Order.Status.values, allow_null=True)
    # When a pending order's units go back on sale unpaid; null without a payment step.
    expires_at = serializers.DateTimeField(allow_null=True)


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": settings.FLASHSALE_MAX_PER_ORDER})
class QuantityField(serializers.IntegerField):
    """An integer. Its range is a sale rule that ``order_create`` keeps; the schema
    states it, from the same setting, and the rule lives once."""


class IsBuyerOrStaff(permissions.BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        return buyer_name(request.user) is not None or bool(getattr(request.user, "is_staff", False))


class OrderCreateApi(BuyerView, APIView):
    # With FLASHSALE_BUYER_AUTH, the buyer is the one its credentials name: a bearer
    # token (read without a database query), or the shop page's session, whose CSRF
    # token DRF checks. Without it, a buyer names itself in the body (user_id), and no
    # session is read. A plain JSON purchase is answered before it reaches this view,
    # with the same answer (orders.wsgi): the sale's hot path. This view answers
    # the rest, and every purchase while the shortcut is off.
    throttle_classes = [PurchaseAddressThrottle, PurchaseUserThrottle]
    purchase_sku: str | None = None  # the purchase's, once its body is read: the metrics' label

    @extend_schema_serializer(component_name="PurchaseRequest")
    class InputSerializer(ClosedInputSerializer):
        """A purchase: which product, how many units, for which buyer. A key not
        listed here is refused."""

        sku = StrictCharField(min_length=1, max_length=SKU_MAX_LENGTH)
        # Its range (1..FLASHSALE_MAX_PER_ORDER) is a sale rule: order_create keeps it,
        # the schema states it.
        quantity = QuantityField()
        user_id = StrictCharField(min_length=1, max_length=USER_ID_MAX_LENGTH)

    @extend_schema_serializer(component_name="BuyerPurchaseRequest")
    class BuyerInputSerializer(ClosedInputSerializer):
        """A purchase by the buyer the credentials name: which product, how many units."""

        sku = StrictCharField(min_length=1, max_length=SKU_MAX_LENGTH)
        quantity = QuantityField()

        def to_internal_value(self, data: object) -> Any:
            if isinstance(data, dict) and "user_id" in data:
                raise serializers.ValidationError(
                    {"user_id": ["the buyer is the one the credentials name: leave user_id out"]})
            return super().to_internal_value(data)

    @extend_schema_serializer(component_name="Purchase")
    class OutputSerializer(OrderSerializer):
        # What the segment(s) this order took from had left right after it.
        remaining = serializers.IntegerField()

    @extend_schema(
        # The deployment's shape: the schema is made in its process.
        request=BuyerInputSerializer if settings.FLASHSALE_BUYER_AUTH else InputSerializer,
        parameters=[OpenApiParameter(
            "Idempotency-Key", {"type": "string", "pattern": f"^{_IDEMPOTENCY_KEY.pattern}$"},
            OpenApiParameter.HEADER,
            description="Retries with the same key count once: 1 to 128 visible ASCII characters."),
            OpenApiParameter(
                "Admission", {"type": "string"}, OpenApiParameter.HEADER,
                description="The admission the sale's waiting room gave this buyer (its `admission`), "
                            "which a sale with a room requires; spent by this purchase and its retries.")],
        responses={
            201: OutputSerializer,
            200: OpenApiResponse(OutputSerializer, "replay of an earlier request with this key"),
            **error_responses(InvalidInput, NO_BUYER, NO_CSRF, AdmissionRefused, NotFound, NotStarted, Ended,
                              SoldOut,
                              LimitReached, IdempotencyConflict, Busy,
                              StaleLock, Unavailable, OutcomeUnknown, THROTTLED, UNSUPPORTED_MEDIA_TYPE,
                              TOO_LARGE, NO_INSTANCE, TIMED_OUT),
        },
    )
    def post(self, request: Request) -> Response:
        if settings.FLASHSALE_BUYER_AUTH:
            purchase = (plain_purchase(request.data, by_credentials=True)
                        or _buyer_input.run_validation(request.data))
            purchase = {**purchase, "user_id": buyer_name(request.user)}
        else:
            purchase = plain_purchase(request.data) or _purchase_input.run_validation(request.data)
        self.purchase_sku = purchase["sku"]  # for the metrics' label, below
        body, code, headers = purchase_answer(request, purchase)
        return Response(body, status=code, headers=headers)

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        # Every answer of this view, a refusal raised before post() (a throttle) too.
        response = super().finalize_response(request, response, *args, **kwargs)
        purchase_counted(sku=self.purchase_sku, body=response.data,
                         status=response.status_code, arrived=request.META.get(ARRIVED))
        return response


def purchase_answer(request: Request | HttpRequest, purchase: dict[str, Any],
                    ) -> tuple[dict[str, Any], int, dict[str, str]]:
    """The purchase's answer (body, status, headers) to a validated ``purchase``: the
    view's and the purchase's shortcut's (``orders.wsgi``) alike.

    :raises InvalidInput: a malformed Idempotency-Key; and whatever ``order_create`` raises.
    """
    key = request.META.get("HTTP_IDEMPOTENCY_KEY")
    if key is not None and not _IDEMPOTENCY_KEY.fullmatch(key):
        raise InvalidInput("Idempotency-Key must be 1 to 128 visible ASCII characters")
    if key is not None and settings.FLASHSALE_BUYER_AUTH:
        key = key_scoped(purchase["user_id"], key)  # the buyer's own: see key_scoped
    result: OrderResult = order_create(idempotency_key=key, received_at=_received_at(request),
                                       admission=request.META.get("HTTP_ADMISSION"), **purchase)
    # The body is the OutputSerializer's fields, read straight off the result: a
    # serializer instance deep-copies its fields per request, a cost the hot path
    # of a sale measurably pays (see the README's gate figures). It stays the schema.
    body = {name: getattr(result, name) for name in _PURCHASE_OUTPUT}
    if result.replayed:
        return body, status.HTTP_200_OK, {"Idempotent-Replayed": "true"}
    return body, status.HTTP_201_CREATED, _server_timing(result.timings)


# One instance, built once: ``run_validation`` keeps nothing on it (unlike
# ``is_valid``), and a new instance would deep-copy its fields on every purchase.
_purchase_input = OrderCreateApi.InputSerializer()
_buyer_input = OrderCreateApi.BuyerInputSerializer()
_PURCHASE_FIELDS = frozenset(_purchase_input.fields)
_BUYER_FIELDS = frozenset(_buyer_input.fields)
_PURCHASE_OUTPUT = tuple(OrderCreateApi.OutputSerializer._declared_fields)


def plain_purchase(data: object, *, by_credentials: bool = False) -> dict[str, Any] | None:
    """The purchase's fields, when ``data`` is the plain shape the serializer takes
    as it is: these three keys, ``sku`` and ``user_id`` ASCII strings of lengths it
    allows without a NUL, ``quantity`` an integer; ``by_credentials`` (the buyer is
    the one its credentials name), ``sku`` and ``quantity`` only. Else None, and the
    serializer decides (it says what is wrong, in its words). The serializer's fields
    were a large share of a sold-out answer's CPU (``benchmarks.purchase_cpu``);
    ``test_wsgi`` holds this to the serializer's result."""
    if type(data) is not dict or data.keys() != (_BUYER_FIELDS if by_credentials else _PURCHASE_FIELDS):
        return None
    if type(data["quantity"]) is not int or not _plain_text(data["sku"], SKU_MAX_LENGTH):
        return None
    return data if by_credentials or _plain_text(data["user_id"], USER_ID_MAX_LENGTH) else None


def _plain_text(value: object, max_length: int) -> bool:
    # ASCII has no surrogates, which the serializer also refuses.
    return type(value) is str and 0 < len(value) <= max_length and value.isascii() and "\x00" not in value


class OrderDetailApi(APIView):
    """Follow an order: ``accepted`` by the gate, ``confirmed`` once in the database.
    With ``FLASHSALE_BUYER_AUTH``, its buyer's only (and the admin's): to anyone else
    it is not found, so that ids cannot be walked."""

    def get_authenticators(self) -> list[BaseAuthentication]:
        if settings.FLASHSALE_BUYER_AUTH:
            return [BuyerTokenAuthentication(), AdminTokenAuthentication(), SessionAuthentication()]
        return super().get_authenticators()

    def get_permissions(self) -> Sequence[BasePermission]:
        if settings.FLASHSALE_BUYER_AUTH:
            return [IsBuyerOrStaff()]
        # The settings' classes (DEFAULT_PERMISSION_CLASSES), each a BasePermission.
        return cast(Sequence[BasePermission], super().get_permissions())

    @extend_schema(responses={200: OrderDetailSerializer, **error_responses(NO_BUYER, NotFound, Unavailable)})
    def get(self, request: Request, order_id: int) -> Response:
        mine = settings.FLASHSALE_BUYER_AUTH and not request.user.is_staff
        order = order_status_get(order_id=order_id, buyer=buyer_name(request.user) if mine else None)
        return Response(OrderDetailSerializer(order).data)
