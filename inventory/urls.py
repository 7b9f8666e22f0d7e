from django.urls import path

from . import apis

urlpatterns = [
    path("products/<str:sku>", apis.ProductDetailApi.as_view(), name="product-detail"),
]
