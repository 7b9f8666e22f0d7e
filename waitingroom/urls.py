from django.urls import path

from . import apis

urlpatterns = [
    path("products/<str:sku>/room", apis.PlaceAskApi.as_view(), name="place-ask"),
]
