"""The races' JSON API: start one (admin), follow one (anyone). Each view parses,
calls one service, and answers; errors leave through ``common.errors.exception_handler``."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.response import Response
from rest_framework.views import APIView

from common.errors import (
    NOT_AUTHENTICATED,
    PERMISSION_DENIED,
    THROTTLED,
    TOO_LARGE,
    UNSUPPORTED_MEDIA_TYPE,
    InvalidInput,
    NotFound,
    Unavailable,
    error_responses,
)
from common.fields import ClosedInputSerializer, StrategyField
from orders.auth import AdminTokenAuthentication, IsStaff, log_admin_action
from waitingroom.apis import room_terms_popped, room_terms_refused

from .errors import RaceRunning
from .limits import MAX_BUYERS, MAX_CONCURRENCY, MAX_ROOM_RATE, MAX_STOCK
from .services import race_json, race_latest_json, race_start

RACE_STATUSES = ("queued", "running", "finished", "failed", "abandoned")


class LaneRoomSerializer(serializers.Serializer):
    """A column's waiting room, read from it every tick."""

    waiting = serializers.IntegerField()  # places in its queue (abandoned ones not yet skipped included)
    admitted = serializers.IntegerField()  # admissions it gave so far
    admitted_per_s = serializers.FloatField(allow_null=True)  # over the last second; null at first
    series = serializers.ListField(child=serializers.ListField(child=serializers.FloatField()),
                                   help_text="[seconds since the start, waiting, admitted so far], "
                                             "one per tick")


class LaneSerializer(serializers.Serializer):
    """One strategy's column: its product, what its buyers heard, and (once the race
    is over) its audit's verdict."""

    strategy = serializers.CharField()
    sku = serializers.CharField()
    stock = serializers.IntegerField()  # what the product started the race with
    remaining = serializers.IntegerField()  # as its sale keeps it (the stock rows; Redis for the gate)
    orders = serializers.IntegerField()
    sold_out = serializers.IntegerField()  # 409 sold_out answers
    busy = serializers.IntegerField()  # 503 answers
    # Any other answer, or none. (DRF's metaclass takes a declared field off the class:
    # it does not hide the serializer's own ``errors``.)
    errors = serializers.IntegerField()  # type: ignore[assignment]
    oversold = serializers.IntegerField()
    lost_updates = serializers.IntegerField()
    consistent = serializers.BooleanField(allow_null=True)  # null until the audit at the end
    orders_per_s = serializers.FloatField(allow_null=True)  # orders ÷ seconds to its last order
    p50_ms = serializers.FloatField(allow_null=True)
    p99_ms = serializers.FloatField(allow_null=True)
    verdict = serializers.CharField(allow_null=True)  # "held", "oversold by N", ...; null while running
    series = serializers.ListField(child=serializers.ListField(child=serializers.FloatField()),
                                   help_text="[seconds since the start, orders so far], one per tick")
    room = LaneRoomSerializer(allow_null=True)  # null: the race has no waiting room


class RaceRoomSerializer(serializers.Serializer):
    """The terms of every column's waiting room."""

    rate = serializers.IntegerField()  # admissions a second
    active = serializers.IntegerField()  # admitted and not yet bought at once, at most
    admission_s = serializers.IntegerField()  # how long an admission lasts


@extend_schema_serializer(component_name="Race")
class RaceSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    # queued → running → finished, or failed (error says why), or abandoned (the
    # runner died, or never took it, and its lease lapsed).
    status = serializers.ChoiceField(choices=RACE_STATUSES)
    strategies = serializers.ListField(child=serializers.CharField())
    stock = serializers.IntegerField()
    buyers = serializers.IntegerField()
    concurrency = serializers.IntegerField()
    room = RaceRoomSerializer(allow_null=True)  # null: the buyers buy at once, no waiting room
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    elapsed_s = serializers.FloatField()
    sent = serializers.IntegerField()
    answered = serializers.IntegerField()
    total = serializers.IntegerField()  # buyers × strategies
    error = serializers.CharField(allow_null=True)
    lanes = LaneSerializer(many=True)


class RaceCreateApi(APIView):
    authentication_classes = [AdminTokenAuthentication, SessionAuthentication]
    permission_classes = [IsStaff]

    @extend_schema_serializer(component_name="RaceRequest")
    class InputSerializer(ClosedInputSerializer):
        """A race: the strategies (each once; a repeated one counts once), each
        product's stock, the buyers (each buys one unit from every strategy's
        product), how many requests are in flight at once, over all of them, and
        optionally a waiting room before every product's sale (its admissions a
        second, and how many admitted buyers at once at most: default ten seconds'
        worth). A key not listed here is refused."""

        strategies = serializers.ListField(child=StrategyField(), min_length=1)
        stock = serializers.IntegerField(min_value=1, max_value=MAX_STOCK, default=100)
        buyers = serializers.IntegerField(min_value=1, max_value=MAX_BUYERS, default=1000)
        concurrency = serializers.IntegerField(min_value=1, max_value=MAX_CONCURRENCY, default=64)
        room_rate = serializers.IntegerField(min_value=1, max_value=MAX_ROOM_RATE, required=False)
        room_active = serializers.IntegerField(min_value=1, max_value=MAX_BUYERS, required=False)

        refused = room_terms_refused("active")

        def validate(self, attrs):
            attrs["room"] = room_terms_popped(attrs)
            return attrs

        def validate_strategies(self, names):
            return list(dict.fromkeys(names))  # in the order given, each once

    @extend_schema(
        request=InputSerializer,
        responses={201: RaceSerializer,
                   **error_responses(InvalidInput, RaceRunning, NOT_AUTHENTICATED, PERMISSION_DENIED,
                                     THROTTLED, UNSUPPORTED_MEDIA_TYPE, TOO_LARGE, Unavailable)},
    )
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        race = race_start(**serializer.validated_data)
        log_admin_action(request, "race", id=race["id"], **serializer.validated_data)
        return Response(RaceSerializer(race).data, status=status.HTTP_201_CREATED,
                        headers={"Location": f"/api/races/{race['id']}"})


class RaceDetailApi(APIView):
    """A race as its runner last wrote it, several times a second while it runs."""

    authentication_classes: list = []

    @extend_schema(responses={200: RaceSerializer, **error_responses(NotFound)})
    def get(self, request, race_id: int):
        # Kept in the schema's shape by the runner: answered as it is kept.
        return HttpResponse(race_json(race_id=race_id), content_type="application/json")


class RaceLatestApi(APIView):
    """The newest race (the page opens on it), as ``/api/races/<id>`` reads it."""

    authentication_classes: list = []

    @extend_schema(responses={200: RaceSerializer, **error_responses(NotFound)})
    def get(self, request):
        return HttpResponse(race_latest_json(), content_type="application/json")
