"""``manage.py schema_ready``: whether this code's schema is in place (``orders.gate.schema``)."""

from typing import Any

from django.conf import settings
from django.core.management.base import CommandError

from common.commands import CommandWithoutChecks
from common.strategies import strategy_get
from orders.gate.schema import schema_state


class Command(CommandWithoutChecks):
    help = ("Exit 0 when every migration of this code is applied; under the gate (FLASHSALE_STRATEGY), also "
            "when the database is away and the gate's Redis marks them applied. The apps' init container "
            "waits on it: a pod that sells from Redis starts while MariaDB restarts.")

    def handle(self, *args: str, **options: Any) -> None:
        state = schema_state(gated=strategy_get(settings.FLASHSALE_STRATEGY).gated)
        if not state.ready:
            raise CommandError(state.value)
        self.stdout.write(state.value)
