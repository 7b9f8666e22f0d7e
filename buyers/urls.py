from django.urls import path

from .apis import BuyerCreateApi, TokenCreateApi

urlpatterns = [
    path("buyers", BuyerCreateApi.as_view(), name="buyer-create"),
    path("buyers/token", TokenCreateApi.as_view(), name="buyer-token"),
]
