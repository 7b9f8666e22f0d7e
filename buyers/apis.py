"""The buyers' API: a new buyer (``POST /api/buyers``), a token for one that signs in
(``POST /api/buyers/token``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.challenges import Challenge, challenge_issue
from common.errors import (
    THROTTLED,
    ChallengeRefused,
    CredentialsRefused,
    InvalidInput,
    SignInLocked,
    UsernameTaken,
    error_responses,
)
from common.fields import ClosedInputSerializer, StrictCharField
from common.throttles import PerAddress, client_bucket

from .services import (
    BUYER_NAME_MAX_LENGTH,
    PASSWORD_MIN_LENGTH,
    SIGN_UP,
    buyer_create,
    buyer_sign_in,
    sign_up_bits,
)


class SignUpThrottle(PerAddress):
    """New buyers and sign-ins per client address (``FLASHSALE_THROTTLE_SIGN_UP``;
    empty: off)."""

    scope = "sign-up"
    rate_setting = "FLASHSALE_THROTTLE_SIGN_UP"


@extend_schema_serializer(component_name="BuyerToken")
class TokenSerializer(serializers.Serializer[dict[str, Any]]):  # the answer the views build
    username = serializers.CharField()
    token = serializers.CharField()
    expires_at = serializers.IntegerField(help_text="epoch seconds")


@extend_schema_serializer(component_name="Challenge")
class ChallengeSerializer(serializers.Serializer[Challenge]):
    challenge = serializers.CharField(
        source="token", help_text="solve: a nonce such that SHA-256 of '<challenge>:<nonce>' starts with "
                                  "`bits` zero bits; send 'Challenge-Solution: <challenge>:<nonce>'")
    bits = serializers.IntegerField(help_text="0: no work asked")
    expires_at = serializers.IntegerField(help_text="epoch seconds")


class SignUpChallengeApi(APIView):
    """A proof-of-work challenge for one new buyer (``FLASHSALE_SIGN_UP_CHALLENGE_BITS``
    zero bits; 0: none asked)."""

    authentication_classes = ()
    permission_classes = ()
    throttle_classes = [SignUpThrottle]

    @extend_schema(request=None, responses={201: ChallengeSerializer, **error_responses(THROTTLED)})
    def post(self, request: Request) -> Response:
        issued = challenge_issue(purpose=SIGN_UP, bits=sign_up_bits())
        return Response(ChallengeSerializer(issued).data, status=status.HTTP_201_CREATED)


SOLUTION = OpenApiParameter("Challenge-Solution", str, OpenApiParameter.HEADER, required=False,
                            description="'<challenge>:<nonce>', when a challenge asks for work "
                                        "(POST /api/buyers/challenge)")


class BuyerCreateApi(APIView):
    """A new buyer: with a username and password, an account that can sign in again;
    with neither, a throwaway buyer, good until its token expires. When new buyers
    cost work (``FLASHSALE_SIGN_UP_CHALLENGE_BITS``), with a solved challenge."""

    authentication_classes = ()
    permission_classes = ()
    throttle_classes = [SignUpThrottle]

    @extend_schema_serializer(component_name="BuyerRequest")
    class InputSerializer(ClosedInputSerializer):
        username = StrictCharField(min_length=1, max_length=BUYER_NAME_MAX_LENGTH, required=False)
        # At least 8 characters and none of the common passwords (AUTH_PASSWORD_VALIDATORS:
        # the list is the server's, so a refusal of one is a 400 no schema foretells).
        password = StrictCharField(min_length=PASSWORD_MIN_LENGTH, max_length=128, required=False,
                                   trim_whitespace=False)

    @extend_schema(request=InputSerializer, parameters=[SOLUTION], responses={
        201: TokenSerializer,
        **error_responses(InvalidInput, ChallengeRefused, UsernameTaken, THROTTLED, SignInLocked)})
    def post(self, request: Request) -> Response:
        given = _input.run_validation(request.data)
        user, issued = buyer_create(username=given.get("username"), password=given.get("password"),
                                    client=client_bucket(request),
                                    solution=request.META.get("HTTP_CHALLENGE_SOLUTION"))
        return Response({"username": user.username, "token": issued.token, "expires_at": issued.expires_at},
                        status=status.HTTP_201_CREATED)


class TokenCreateApi(APIView):
    """A new token for a buyer that signs in with its password."""

    authentication_classes = ()
    permission_classes = ()
    throttle_classes = [SignUpThrottle]

    @extend_schema_serializer(component_name="SignInRequest")
    class InputSerializer(ClosedInputSerializer):
        username = StrictCharField(min_length=1, max_length=BUYER_NAME_MAX_LENGTH)
        password = StrictCharField(min_length=1, max_length=128, trim_whitespace=False)

    @extend_schema(request=InputSerializer, responses={
        200: TokenSerializer, **error_responses(InvalidInput, CredentialsRefused, THROTTLED, SignInLocked)})
    def post(self, request: Request) -> Response:
        given = _sign_in.run_validation(request.data)
        issued = buyer_sign_in(username=given["username"], password=given["password"],
                               client=client_bucket(request))
        return Response({"username": given["username"], "token": issued.token,
                         "expires_at": issued.expires_at})


_input = BuyerCreateApi.InputSerializer()
_sign_in = TokenCreateApi.InputSerializer()
