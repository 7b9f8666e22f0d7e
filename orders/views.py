"""The browser page: one product, live stock, a Buy button, the audit."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from buyers.authentication import buyer_name


@ensure_csrf_cookie
def index(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "orders/index.html",
        {
            "sku": request.GET.get("sku", settings.FLASHSALE_DEMO_SKU)[:64],
            "strategy": settings.FLASHSALE_STRATEGY,
            "instance": settings.FLASHSALE_INSTANCE,
            "max_per_order": settings.FLASHSALE_MAX_PER_ORDER,
            # With buyers signed in, the page buys as its session's buyer (None: not signed in).
            "buyer_auth": settings.FLASHSALE_BUYER_AUTH,
            "sign_up_bits": settings.FLASHSALE_SIGN_UP_CHALLENGE_BITS,
            "buyer": buyer_name(request.user) if settings.FLASHSALE_BUYER_AUTH else None,
        },
    )
