from django.urls import path

from . import apis, sales_apis

urlpatterns = [
    path("orders", apis.OrderCreateApi.as_view(), name="order-create"),
    path("orders/<int:order_id>", apis.OrderDetailApi.as_view(), name="order-detail"),
    path("products/<str:sku>/audit", sales_apis.SaleAuditApi.as_view(), name="product-audit"),
    path("products/<str:sku>/audit/summary", sales_apis.SaleSummaryApi.as_view(),
         name="product-audit-summary"),
    path("admin/products/<str:sku>/reset", sales_apis.SaleResetApi.as_view(), name="product-reset"),
]
