"""The payments JSON API: a buyer starts paying an order; the provider's webhook
settles it. Each view parses, calls one service, and answers."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from buyers.authentication import BuyerView, buyer_name
from common.errors import (
    NO_BUYER,
    NO_CSRF,
    THROTTLED,
    TOO_LARGE,
    UNSUPPORTED_MEDIA_TYPE,
    Busy,
    InvalidInput,
    NotFound,
    NotPayable,
    PaymentDeclined,
    Unavailable,
    error_responses,
)
from common.fields import ClosedInputSerializer
from common.keys import KEY_SENT

from .provider import SUCCEEDS
from .services import PaymentStarted, payment_start, webhook_receive
from .throttles import decline_budgets


class OrderPayApi(BuyerView, APIView):
    """Pay an order that waits for its payment: the provider is asked at once, and
    confirms by its webhook, which moves the order to ``paid``. Follow the order
    (``GET /api/orders/<id>``) to see it. Declines are counted per order and per
    buyer (``payments.throttles``): past their budget, 429 before the provider is
    asked."""

    @extend_schema_serializer(component_name="PaymentRequest")
    class InputSerializer(ClosedInputSerializer):
        # A payment method the provider knows; in its test mode, pm_card_visa pays
        # and pm_card_chargeDeclined is declined.
        payment_method = serializers.RegexField(r"^pm_[A-Za-z0-9_]{1,60}$", required=False, default=SUCCEEDS)

    @extend_schema_serializer(component_name="PaymentStarted")
    class OutputSerializer(serializers.Serializer[PaymentStarted]):
        order_id = serializers.IntegerField()
        payment_intent = serializers.CharField()
        # The provider's word on the payment; the order moves when its webhook comes.
        status = serializers.CharField()
        amount = serializers.IntegerField()  # in the currency's minor unit
        currency = serializers.CharField()

    @extend_schema(
        request=InputSerializer,
        parameters=[OpenApiParameter(
            "Idempotency-Key", {"type": "string", "pattern": f"^{KEY_SENT.pattern}$"},
            OpenApiParameter.HEADER,
            description="Retries with the same key are one payment: 1 to 128 visible ASCII characters.")],
        responses={202: OutputSerializer,
                   **error_responses(InvalidInput, NO_BUYER, PaymentDeclined, NO_CSRF, NotFound, NotPayable,
                                     TOO_LARGE, UNSUPPORTED_MEDIA_TYPE, THROTTLED, Busy, Unavailable)},
    )
    def post(self, request: Request, order_id: int) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        key = request.META.get("HTTP_IDEMPOTENCY_KEY")
        if key is not None and not KEY_SENT.fullmatch(key):
            raise InvalidInput("Idempotency-Key must be 1 to 128 visible ASCII characters")
        buyer = buyer_name(request.user) if settings.FLASHSALE_BUYER_AUTH else None
        budgets = decline_budgets(order_id=order_id, buyer=buyer)
        if spent := [budget for budget in budgets if budget.spent()]:
            raise exceptions.Throttled(wait=max(budget.wait() or 1 for budget in spent))
        try:
            started = payment_start(order_id=order_id, buyer=buyer, idempotency_key=key,
                                    payment_method=serializer.validated_data["payment_method"])
        except PaymentDeclined:
            for budget in budgets:
                budget.failed()
            raise
        return Response(self.OutputSerializer(started).data, status=status.HTTP_202_ACCEPTED)


class PaymentWebhookApi(APIView):
    """The provider's events, signed (``Stripe-Signature``): the only way an order
    becomes paid. Open to anyone; what is not signed with the endpoint's secret is
    refused."""

    authentication_classes = ()
    permission_classes = ()
    throttle_classes = ()  # the provider's deliveries are not a client's requests

    @extend_schema(
        request={"application/json": {"type": "object", "description": "A provider event (Stripe's shape)."}},
        parameters=[OpenApiParameter(
            "Stripe-Signature", str, OpenApiParameter.HEADER, required=True,
            description="t=<unix time>,v1=<HMAC-SHA256 of '<t>.<body>' with the endpoint's secret>")],
        responses={200: OpenApiResponse(description="Handled, or handled before (a second delivery)."),
                   **error_responses(InvalidInput, TOO_LARGE, Busy, Unavailable)},
    )
    def post(self, request: Request) -> Response:
        outcome = webhook_receive(payload=request.body, signature=request.META.get("HTTP_STRIPE_SIGNATURE"))
        return Response({"received": True, "outcome": outcome})
