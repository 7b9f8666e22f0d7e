"""The inventory's JSON API: a product and its stock. Views parse, call one
selector, and answer; errors leave through ``common.errors.exception_handler``."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.errors import InvalidInput, NotFound, error_responses

from .limits import SKU_MAX_LENGTH
from .reads import product_read
from .selectors import ProductStock

# The sku in a URL, as the schema documents it; ``sku_checked`` holds the API to it.
SKU_PATH = OpenApiParameter("sku", {"type": "string", "minLength": 1, "maxLength": SKU_MAX_LENGTH},
                            OpenApiParameter.PATH)


def sku_checked(sku: str) -> str:
    """A sku from a URL, refused (400) when no product could have it."""
    if len(sku) > SKU_MAX_LENGTH:
        raise InvalidInput(f"sku longer than {SKU_MAX_LENGTH} characters")
    return sku


class ProductDetailApi(APIView):
    # Public, and read by the crowd before a sale: no session looked up.
    authentication_classes = ()
    @extend_schema_serializer(component_name="Product")
    class OutputSerializer(serializers.Serializer[ProductStock]):
        sku = serializers.CharField()
        name = serializers.CharField()
        stock = serializers.IntegerField()
        initial_stock = serializers.IntegerField()
        segments = serializers.IntegerField()
        # The sale's window; null: open from the reset (starts_at), never closes (ends_at).
        starts_at = serializers.DateTimeField(allow_null=True)
        ends_at = serializers.DateTimeField(allow_null=True)
        # The strategy its sale runs under: its own (the reset's), or the deployment's.
        strategy = serializers.CharField()
        # Seconds an order has to be paid before its units go back on sale; 0: none.
        payment_window_s = serializers.IntegerField()

    @extend_schema(parameters=[SKU_PATH],
                   responses={200: OutputSerializer, **error_responses(InvalidInput, NotFound)})
    def get(self, request: Request, sku: str) -> Response:
        # nginx filling its own product cache asks for the row itself (see
        # nginx.conf.template): its entry is the only cache in front of the database then.
        # META, not ``request.headers``: that one is built from every header on first
        # use (what that costs: docs/profile/reads/after-cache.md).
        filling = request.META.get("HTTP_X_CACHE_FILL") == "1"
        product = product_read(sku=sku_checked(sku), fresh=filling)
        return Response(_product_answer(product))


@lru_cache(maxsize=1024)
def _product_answer(product: ProductStock) -> dict[str, Any]:
    """The product's answer. Kept per product value: under a crowd the same cached
    value is asked for thousands of times a second, and DRF builds a serializer's
    fields afresh for each instance (a deepcopy; its share of the read's time is in
    ``docs/profile/reads/after-cache.md``). Shared between threads: never modified."""
    return ProductDetailApi.OutputSerializer(product).data
