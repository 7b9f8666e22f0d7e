"""The shop's management commands start without Django's system checks
(``common.commands``): a worker or an operator's command that read the URL conf would
import every view as it starts."""

from django.conf import settings
from django.core.management import get_commands, load_command_class

from common.commands import CommandWithoutChecks


def test_every_command_of_the_shop_starts_without_the_system_checks():
    ours = {name: app for name, app in get_commands().items()
            if (settings.BASE_DIR / app.replace(".", "/")).is_dir()}
    assert {"persist_orders", "expire_orders", "run_races", "gate_leave", "buyers_make"} <= ours.keys()
    checked = sorted(name for name, app in ours.items()
                     if not isinstance(load_command_class(app, name), CommandWithoutChecks))
    assert checked == []
