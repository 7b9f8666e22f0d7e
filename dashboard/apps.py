from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "The live dashboard: a sale, as Prometheus sees it"
