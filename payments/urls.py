from django.urls import path

from . import apis

urlpatterns = [
    path("orders/<int:order_id>/pay", apis.OrderPayApi.as_view(), name="order-pay"),
    path("payments/webhook", apis.PaymentWebhookApi.as_view(), name="payment-webhook"),
]
