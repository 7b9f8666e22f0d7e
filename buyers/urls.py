from django.urls import path

from .apis import BuyerCreateApi, SignUpChallengeApi, TokenCreateApi

urlpatterns = [
    path("buyers", BuyerCreateApi.as_view(), name="buyer-create"),
    path("buyers/token", TokenCreateApi.as_view(), name="buyer-token"),
    path("buyers/challenge", SignUpChallengeApi.as_view(), name="buyer-challenge"),
]
