"""The waiting room's JSON API: one operation, a buyer asking for its place (the
first ask takes it; every later one, from any tab or instance, finds it and the
admission once it comes). Errors leave through ``common.errors.exception_handler``."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from buyers.apis import SOLUTION, ChallengeSerializer
from buyers.authentication import BuyerView, buyer_name
from common.errors import (
    NO_BUYER,
    NO_CSRF,
    TOO_LARGE,
    UNSUPPORTED_MEDIA_TYPE,
    ChallengeRefused,
    InvalidInput,
    NotFound,
    PlacesBounded,
    Unavailable,
    error_responses,
)
from common.fields import ClosedInputSerializer, StrictCharField
from common.throttles import client_bucket
from inventory.apis import SKU_PATH, sku_checked

from .services import Place, RoomTerms, place_ask, place_challenge

# What a request may give a room beside its rate (room_<term>): its reset takes all four.
ROOM_TERMS = ("active", "admission_s", "order", "challenge_bits")


def room_terms_refused(*terms: str) -> tuple[dict[str, Any], ...]:
    """As JSON Schema, the bodies refused: a room's term without its rate (no room to
    set it on)."""
    return tuple({"required": [f"room_{term}"], "not": {"required": ["room_rate"]}} for term in terms)


def room_terms_popped(attrs: dict[str, Any]) -> RoomTerms | None:
    """A request's ``room_*`` keys, taken out of ``attrs``: the room they set, the rest
    by default (``RoomTerms.given``), or None without a rate.

    :raises serializers.ValidationError: a term without the rate.
    """
    rate = attrs.pop("room_rate", None)
    terms = {term: attrs.pop(f"room_{term}", None) for term in ROOM_TERMS}
    if rate is None:
        if any(value is not None for value in terms.values()):
            raise serializers.ValidationError({"room_rate": ["a waiting room needs its rate"]})
        return None
    return RoomTerms.given(rate=rate, **terms)


USER_ID_MAX_LENGTH = 64


class PlaceAskApi(BuyerView, APIView):
    """The buyer's place, the buyer as the purchase takes it (``BuyerView``)."""

    @extend_schema_serializer(component_name="PlaceAskRequest")
    class InputSerializer(ClosedInputSerializer):
        """Whose place. A key not listed here is refused."""

        user_id = StrictCharField(min_length=1, max_length=USER_ID_MAX_LENGTH)

    @extend_schema_serializer(component_name="BuyerPlaceAskRequest")
    class BuyerInputSerializer(ClosedInputSerializer):
        """The place of the buyer the credentials name: an empty object."""

    @extend_schema_serializer(component_name="Place")
    class OutputSerializer(serializers.Serializer[Place]):
        state = serializers.ChoiceField(choices=["waiting", "admitted", "used"])
        position = serializers.IntegerField()  # 1 for the first to ask
        ahead = serializers.IntegerField()  # places before this one still waiting
        wait_s = serializers.IntegerField(allow_null=True)  # an estimate at the room's rate
        # Once admitted: what the purchase sends (the Admission header), until it expires.
        admission = serializers.CharField(allow_null=True)
        admission_expires_at = serializers.IntegerField(allow_null=True)  # epoch seconds
        # Waiting: when to ask again (the wait over 4, from 2 to 60 s); a place whose
        # holder is late for that ask by FLASHSALE_ROOM_ABANDON_S is given up.
        ask_again_s = serializers.FloatField(allow_null=True)

    @extend_schema(
        # The deployment's shape: the schema is made in its process.
        request=BuyerInputSerializer if settings.FLASHSALE_BUYER_AUTH else InputSerializer,
        parameters=[SKU_PATH, SOLUTION],
        responses={200: OutputSerializer,
                   **error_responses(InvalidInput, NO_BUYER, NO_CSRF, NotFound, PlacesBounded,
                                     ChallengeRefused, Unavailable, TOO_LARGE, UNSUPPORTED_MEDIA_TYPE)},
    )
    def post(self, request: Request, sku: str) -> Response:
        by_credentials = settings.FLASHSALE_BUYER_AUTH
        data = (self.BuyerInputSerializer if by_credentials else self.InputSerializer)(data=request.data)
        data.is_valid(raise_exception=True)
        buyer = buyer_name(request.user) if by_credentials else data.validated_data["user_id"]
        assert buyer is not None  # IsBuyer lets only a buyer in
        place = place_ask(sku=sku_checked(sku), buyer=buyer, address=client_bucket(request),
                          solution=request.META.get("HTTP_CHALLENGE_SOLUTION"))
        return Response(self.OutputSerializer(place).data)


class PlaceChallengeApi(APIView):
    """A proof-of-work challenge for a place in the sale's waiting room, of the zero
    bits its reset set (``room_challenge_bits``; 0: none asked). A buyer solves it
    before its first ask and sends the solution with it."""

    authentication_classes = ()
    permission_classes = ()

    @extend_schema(request=None, parameters=[SKU_PATH],
                   responses={201: ChallengeSerializer, **error_responses(InvalidInput, NotFound)})
    def post(self, request: Request, sku: str) -> Response:
        return Response(ChallengeSerializer(place_challenge(sku=sku_checked(sku))).data, status=201)
