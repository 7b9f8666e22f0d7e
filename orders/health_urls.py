from django.urls import path

from . import health

urlpatterns = [
    path("livez", health.livez, name="livez"),
    path("readyz", health.readyz, name="readyz"),
    path("healthz", health.healthz, name="healthz"),
    path("api/ping", health.ping, name="ping"),
]
