from django.apps import AppConfig


class LockingConfig(AppConfig):
    name = "locking"
    verbose_name = "Locking"
