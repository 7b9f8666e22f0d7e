"""The buyers' API: a new buyer (``POST /api/buyers``), a token for one that signs in
(``POST /api/buyers/token``)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from common.errors import (
    THROTTLED,
    CredentialsRefused,
    InvalidInput,
    SignInLocked,
    UsernameTaken,
    error_responses,
)
from common.fields import ClosedInputSerializer, StrictCharField
from common.throttles import PerAddress, client_bucket

from .services import BUYER_NAME_MAX_LENGTH, PASSWORD_MIN_LENGTH, buyer_create, buyer_sign_in


class SignUpThrottle(PerAddress):
    """New buyers and sign-ins per client address (``FLASHSALE_THROTTLE_SIGN_UP``;
    empty: off)."""

    scope = "sign-up"
    rate_setting = "FLASHSALE_THROTTLE_SIGN_UP"


@extend_schema_serializer(component_name="BuyerToken")
class TokenSerializer(serializers.Serializer):
    username = serializers.CharField()
    token = serializers.CharField()
    expires_at = serializers.IntegerField(help_text="epoch seconds")


class BuyerCreateApi(APIView):
    """A new buyer: with a username and password, an account that can sign in again;
    with neither, a throwaway buyer, good until its token expires."""

    authentication_classes: list = []
    permission_classes: list = []
    throttle_classes = [SignUpThrottle]

    @extend_schema_serializer(component_name="BuyerRequest")
    class InputSerializer(ClosedInputSerializer):
        username = StrictCharField(min_length=1, max_length=BUYER_NAME_MAX_LENGTH, required=False)
        # At least 8 characters and none of the common passwords (AUTH_PASSWORD_VALIDATORS:
        # the list is the server's, so a refusal of one is a 400 no schema foretells).
        password = StrictCharField(min_length=PASSWORD_MIN_LENGTH, max_length=128, required=False,
                                   trim_whitespace=False)

    @extend_schema(request=InputSerializer, responses={
        201: TokenSerializer, **error_responses(InvalidInput, UsernameTaken, THROTTLED, SignInLocked)})
    def post(self, request):
        given = _input.run_validation(request.data)
        user, issued = buyer_create(username=given.get("username"), password=given.get("password"),
                                    client=client_bucket(request))
        return Response({"username": user.username, "token": issued.token, "expires_at": issued.expires_at},
                        status=status.HTTP_201_CREATED)


class TokenCreateApi(APIView):
    """A new token for a buyer that signs in with its password."""

    authentication_classes: list = []
    permission_classes: list = []
    throttle_classes = [SignUpThrottle]

    @extend_schema_serializer(component_name="SignInRequest")
    class InputSerializer(ClosedInputSerializer):
        username = StrictCharField(min_length=1, max_length=BUYER_NAME_MAX_LENGTH)
        password = StrictCharField(min_length=1, max_length=128, trim_whitespace=False)

    @extend_schema(request=InputSerializer, responses={
        200: TokenSerializer, **error_responses(InvalidInput, CredentialsRefused, THROTTLED, SignInLocked)})
    def post(self, request):
        given = _sign_in.run_validation(request.data)
        issued = buyer_sign_in(username=given["username"], password=given["password"],
                               client=client_bucket(request))
        return Response({"username": given["username"], "token": issued.token,
                         "expires_at": issued.expires_at})


_input = BuyerCreateApi.InputSerializer()
_sign_in = TokenCreateApi.InputSerializer()
