from django.apps import AppConfig


class BuyersConfig(AppConfig):
    name = "buyers"
    default_auto_field = "django.db.models.BigAutoField"
