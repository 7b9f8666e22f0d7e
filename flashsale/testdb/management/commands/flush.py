"""``flush`` under the test settings (flashsale.settings.test), which install this app
first so that its command stands in for Django's: what TransactionTestCase runs after
each test that commits.

Every table is emptied but the content types' and the permissions'. migrate filled
those from the models and no test changes them; Django's flush empties them too, then
sends post_migrate, whose handlers write them again row by row: most of a flush's CPU,
the pytest's and MariaDB's, after every such test. Kept, they need no post_migrate,
and their rows keep their ids, which ContentType's cache holds."""

from typing import Any

from django.core.management.base import CommandError
from django.core.management.color import no_style
from django.core.management.commands import flush
from django.db import connections

from common.commands import CommandWithoutChecks

KEPT = frozenset({"django_content_type", "auth_permission"})


class Command(CommandWithoutChecks, flush.Command):
    help = "Empty every table but the content types' and the permissions' (the test settings' flush)."

    def handle(self, **options: Any) -> None:
        if options["interactive"]:
            raise CommandError("the test settings' flush asks nothing: run it with --no-input")
        connection = connections[options["database"]]
        existing = connection.introspection.django_table_names(only_existing=True, include_views=False)
        tables = [table for table in existing if table not in KEPT]
        connection.ops.execute_sql_flush(connection.ops.sql_flush(
            no_style(), tables, reset_sequences=options.get("reset_sequences", False),
            allow_cascade=options.get("allow_cascade", False)))
