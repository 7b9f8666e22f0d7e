from django.urls import path

from . import apis

urlpatterns = [
    path("products/<str:sku>/room", apis.PlaceAskApi.as_view(), name="place-ask"),
    path("products/<str:sku>/room/challenge", apis.PlaceChallengeApi.as_view(), name="place-challenge"),
]
