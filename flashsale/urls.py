from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from flashsale import health

urlpatterns = [
    # The apps' routes by name (include), so the project shell imports none of them.
    path("", include("orders.page_urls")),
    path("", include("races.page_urls")),
    path("livez", health.livez, name="livez"),
    path("readyz", health.readyz, name="readyz"),
    path("healthz", health.healthz, name="healthz"),
    path("api/ping", health.ping, name="ping"),
    path("api/schema", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI from drf-spectacular-sidecar's static files: no CDN, works offline.
    path("api/docs", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/", include("orders.urls")),
    path("api/", include("inventory.urls")),
    path("api/", include("races.urls")),
    path("admin/", admin.site.urls),
]

handler404 = "flashsale.errors.handler404"
handler500 = "flashsale.errors.handler500"
