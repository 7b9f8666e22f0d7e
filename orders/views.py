"""The browser page: one product, live stock, a Buy button, the audit."""

from django.conf import settings
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie


@ensure_csrf_cookie
def index(request):
    return render(
        request,
        "orders/index.html",
        {
            "sku": request.GET.get("sku", settings.FLASHSALE_DEMO_SKU)[:64],
            "strategy": settings.FLASHSALE_STRATEGY,
            "instance": settings.FLASHSALE_INSTANCE,
            "max_per_order": settings.FLASHSALE_MAX_PER_ORDER,
        },
    )
