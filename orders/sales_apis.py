"""A sale's JSON API: its audit (in full for the admin, its summary for anyone) and
its reset. Each view parses, calls one service or selector, and answers; errors
leave through ``common.errors.exception_handler``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import (
    extend_schema,
    extend_schema_serializer,
)
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.challenges import MOST_BITS
from common.errors import (
    NOT_AUTHENTICATED,
    PERMISSION_DENIED,
    THROTTLED,
    TOO_LARGE,
    UNSUPPORTED_MEDIA_TYPE,
    Busy,
    InvalidInput,
    NotFound,
    Unavailable,
    error_responses,
)
from common.fields import ClosedInputSerializer, MomentField, StrategyField, StrictCharField
from common.strategies import STRATEGIES
from inventory.apis import SKU_PATH, ProductDetailApi, sku_checked
from inventory.limits import MAX_SEGMENTS
from inventory.selectors import product_stock_get
from waitingroom.apis import ROOM_TERMS, room_terms_popped, room_terms_refused

from .auth import AdminTokenAuthentication, IsStaff, log_admin_action
from .reset import sale_reset
from .selectors import GateAudit, SaleAudit, SaleSummary, sale_audit_recent, sale_summary_get


class GateAuditSerializer(serializers.Serializer[GateAudit]):
    """The gate's side of a sale: Redis, its stream and MySQL, reconciled."""

    # Redis's counts are null when Redis lost the sale (redis_lost): nobody knows them.
    redis_remaining = serializers.IntegerField(allow_null=True)
    loaded = serializers.IntegerField()
    accepted = serializers.IntegerField(allow_null=True)
    accepted_quantity = serializers.IntegerField(allow_null=True)
    persisted = serializers.IntegerField()
    backlog = serializers.IntegerField(allow_null=True)
    unacknowledged = serializers.IntegerField(allow_null=True)
    undelivered = serializers.IntegerField(allow_null=True)
    dead_lettered = serializers.IntegerField(allow_null=True)
    # Units expired orders gave back to Redis, and of those, units late payments took again.
    returned = serializers.IntegerField(allow_null=True)
    retaken = serializers.IntegerField(allow_null=True)
    reconciled = serializers.BooleanField()
    # Redis no longer holds the sale MySQL says it loaded: of its units, these are in
    # neither store (sold and lost with Redis, or never sold). The audit is then not
    # consistent.
    redis_lost = serializers.BooleanField()
    unknown_units = serializers.IntegerField()
    # From accepted to written, over the orders written so far; null before the first.
    confirm_p50_ms = serializers.FloatField(allow_null=True)
    confirm_p99_ms = serializers.FloatField(allow_null=True)


class SaleAuditApi(APIView):
    """The full audit: the ledger's match, the gate's stores and confirm times. Its
    cost grows with the sale, and it tells how the sale is kept: the admin's."""

    authentication_classes = [AdminTokenAuthentication, SessionAuthentication]
    permission_classes = [IsStaff]

    @extend_schema_serializer(component_name="SaleAudit")
    class OutputSerializer(serializers.Serializer[SaleAudit]):
        sku = serializers.CharField()
        initial_stock = serializers.IntegerField()
        remaining = serializers.IntegerField()
        orders = serializers.IntegerField()
        ordered_quantity = serializers.IntegerField()
        flow_rows = serializers.IntegerField()
        flow_quantity = serializers.IntegerField()
        oversold = serializers.IntegerField()
        lost_updates = serializers.IntegerField()
        consistent = serializers.BooleanField()
        retries = serializers.IntegerField()
        segments_remaining = serializers.ListField(child=serializers.IntegerField())
        # Units the ledger gave back to the sale: expired orders'.
        returned_quantity = serializers.IntegerField()
        # The orders by status: placed (no payment step), pending, paid, expired, refunded.
        orders_by_status = serializers.DictField(child=serializers.IntegerField())
        # Null unless the product is sold through the gate.
        gate = GateAuditSerializer(allow_null=True)
        starts_at = serializers.DateTimeField(allow_null=True)
        ends_at = serializers.DateTimeField(allow_null=True)
        strategy = serializers.CharField()

    @extend_schema(parameters=[SKU_PATH],
                   responses={200: OutputSerializer, **error_responses(
                       InvalidInput, NotFound, NOT_AUTHENTICATED, PERMISSION_DENIED, Busy, Unavailable)})
    def get(self, request: Request, sku: str) -> Response:
        audit = sale_audit_recent(sku=sku_checked(sku))
        return Response(self.OutputSerializer(audit).data)


class SaleSummaryApi(APIView):
    """The audit's public summary: orders, units sold, stock left, consistent or not;
    at most ``FLASHSALE_AUDIT_SUMMARY_MS`` plus one audit old (``as_of`` says when)."""

    # Public, and read by the page after every purchase: no session looked up.
    authentication_classes = ()

    @extend_schema_serializer(component_name="SaleSummary")
    class OutputSerializer(serializers.Serializer[SaleSummary]):
        sku = serializers.CharField()
        initial_stock = serializers.IntegerField()
        orders = serializers.IntegerField()
        sold = serializers.IntegerField()
        remaining = serializers.IntegerField()
        consistent = serializers.BooleanField()
        as_of = serializers.DateTimeField()

    @extend_schema(parameters=[SKU_PATH],
                   responses={200: OutputSerializer,
                              **error_responses(InvalidInput, NotFound, Busy, Unavailable)})
    def get(self, request: Request, sku: str) -> Response:
        return Response(self.OutputSerializer(sale_summary_get(sku=sku_checked(sku))).data)


# The furthest a window's edge may be set from now: 30 days.
_WINDOW_MAX_S = 30 * 24 * 3600


class SaleResetApi(APIView):
    authentication_classes = [AdminTokenAuthentication, SessionAuthentication]
    permission_classes = [IsStaff]

    @extend_schema_serializer(component_name="SaleResetRequest")
    class InputSerializer(ClosedInputSerializer):
        """A sale started again: its stock, and optionally its name, its strategy,
        its stock's segments and its window: it opens at ``starts_at`` (or
        ``starts_in`` seconds from now; default: at once) and closes at ``ends_at``
        (or ``ends_in`` seconds from now; default: never). A key not listed here is
        refused."""

        stock = serializers.IntegerField(min_value=0, max_value=10_000_000)
        name = StrictCharField(min_length=1, max_length=200, required=False)
        # Default: FLASHSALE_STOCK_SEGMENTS.
        segments = serializers.IntegerField(min_value=1, max_value=MAX_SEGMENTS, required=False)
        starts_at = MomentField(required=False)
        starts_in = serializers.IntegerField(min_value=0, max_value=_WINDOW_MAX_S, required=False)
        ends_at = MomentField(required=False)
        ends_in = serializers.IntegerField(min_value=1, max_value=_WINDOW_MAX_S, required=False)
        # The strategy that guards this product's sale; default: the deployment's
        # (FLASHSALE_STRATEGY), whatever it is when a purchase comes.
        strategy = StrategyField(required=False)
        # Seconds each order has to be paid before its units go back on sale; 0, the
        # default: no payment step, an order is final at its 201.
        payment_window_s = serializers.IntegerField(min_value=0, max_value=24 * 3600, required=False)
        # A waiting room: buyers admitted room_rate a second, at most room_active
        # admitted and not yet bought at once (default: ten seconds' admissions), each
        # admission good for room_admission_s (default 60). Without room_rate: none.
        room_rate = serializers.IntegerField(min_value=1, max_value=100_000, required=False)
        room_active = serializers.IntegerField(min_value=1, max_value=10_000_000, required=False)
        room_admission_s = serializers.IntegerField(min_value=1, max_value=3600, required=False)
        # The order it admits in: "fifo" (the default: as places were taken), or
        # "shuffled" (those taken before the sale opens in a random order, then the rest).
        room_order = serializers.ChoiceField(choices=["fifo", "shuffled"], required=False)
        # Proof of work before a place: the zero bits a buyer's challenge asks (0, the
        # default: none). Each bit doubles a bot's cost of a place.
        room_challenge_bits = serializers.IntegerField(min_value=0, max_value=MOST_BITS, required=False)

        exclusive = (("starts_at", "starts_in"), ("ends_at", "ends_in"))
        # A strategy that keeps the stock in one counter (the gate) takes no segments:
        # sale_reset refuses them; the schema states it. (Without "strategy", the
        # deployment's decides, which no schema can know.)
        unsegmented = [name for name, spec in STRATEGIES.items() if not spec.segmented]
        refused = ({"required": ["strategy", "segments"],
                    "properties": {"strategy": {"enum": unsegmented}, "segments": {"minimum": 2}}},
                   *room_terms_refused(*ROOM_TERMS))

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if (room := room_terms_popped(attrs)) is not None:
                attrs["room"] = room
            now = timezone.now()
            for edge in ("starts", "ends"):
                seconds = attrs.pop(f"{edge}_in", None)
                if seconds is not None:
                    attrs[f"{edge}_at"] = now + timedelta(seconds=seconds)
            return attrs

    @extend_schema(
        request=InputSerializer,
        parameters=[SKU_PATH],
        responses={200: ProductDetailApi.OutputSerializer,
                   **error_responses(InvalidInput, NOT_AUTHENTICATED, PERMISSION_DENIED, THROTTLED,
                                     UNSUPPORTED_MEDIA_TYPE, TOO_LARGE, Busy, Unavailable)},
    )
    def post(self, request: Request, sku: str) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        sale_reset(sku=sku_checked(sku), **serializer.validated_data)
        log_admin_action(request, "reset", sku=sku, **serializer.validated_data)
        product = product_stock_get(sku=sku)
        return Response(ProductDetailApi.OutputSerializer(product).data)
