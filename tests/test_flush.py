"""The test settings' flush (flashsale/testdb), run after each test that commits:
what the test wrote is gone, and the content types and permissions migrate wrote stay,
ids and all, as many as post_migrate would write."""

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command, get_commands
from django.core.management.base import CommandError
from django.core.management.sql import emit_post_migrate_signal
from django.db import connection

from flashsale.testdb.management.commands.flush import KEPT
from inventory.models import Product

pytestmark = pytest.mark.django_db(transaction=True)


def rows(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(table)}")
        return cursor.fetchone()[0]


def content_types() -> list[tuple]:
    return list(ContentType.objects.order_by("id").values_list("id", "app_label", "model"))


def permissions() -> list[tuple]:
    return list(Permission.objects.order_by("id").values_list("id", "content_type_id", "codename"))


def test_a_flush_empties_every_table_but_the_content_types_and_permissions_migrate_wrote():
    assert get_commands()["flush"] == "flashsale.testdb"
    types, granted = content_types(), permissions()
    emit_post_migrate_signal(0, False, connection.alias)  # what Django's flush sends: nothing to add
    assert content_types() == types and permissions() == granted and granted
    Product.objects.create(sku="flushed-1", name="flushed")
    User.objects.create_user("flushed", password="x").user_permissions.add(Permission.objects.first())

    call_command("flush", interactive=False, verbosity=0)

    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    assert {"inventory_product", "auth_user", "auth_user_user_permissions"} <= set(tables)
    assert {table: rows(table) for table in tables if table not in KEPT and rows(table)} == {}
    assert content_types() == types and permissions() == granted


def test_it_asks_nothing_and_says_how_to_run_it():
    with pytest.raises(CommandError, match="--no-input"):
        call_command("flush", interactive=True)
