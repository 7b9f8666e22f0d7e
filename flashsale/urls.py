from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    # The apps' routes by name (include), so the project shell imports none of them.
    path("", include("orders.page_urls")),
    path("", include("buyers.page_urls")),
    path("", include("races.page_urls")),
    path("", include("dashboard.urls")),
    path("", include("orders.health_urls")),
    path("", include("common.urls")),  # /metrics
    path("api/schema", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI from drf-spectacular-sidecar's static files: no CDN, works offline.
    path("api/docs", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/", include("orders.urls")),
    path("api/", include("payments.urls")),
    path("api/", include("waitingroom.urls")),
    path("api/", include("inventory.urls")),
    path("api/", include("races.urls")),
    path("api/", include("buyers.urls")),
    path("admin/", admin.site.urls),
]

handler404 = "common.errors.handler404"
handler500 = "common.errors.handler500"
