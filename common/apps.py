import os
from pathlib import Path

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class CommonConfig(AppConfig):
    name = "common"
    verbose_name = "What every app shares"

    def ready(self) -> None:
        from .strategies import UnknownStrategy, strategy_get

        # At start-up, not at the first purchase: a typo in the deployment's strategy
        # must stop the process, naming the choices.
        try:
            strategy_get(settings.FLASHSALE_STRATEGY)
        except UnknownStrategy as e:
            raise ImproperlyConfigured(f"FLASHSALE_STRATEGY: {e}") from None

        # prometheus-client's multiprocess files need their directory before the
        # first count; the server's launcher makes it (flashsale.serve), and any other
        # process given the variable (an in-process benchmark) makes it here.
        directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if directory:
            Path(directory).mkdir(parents=True, exist_ok=True)
