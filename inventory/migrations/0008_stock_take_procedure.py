"""Inventory's part of the one-call purchase as a procedure of its own,
``flashsale_stock_take`` (``inventory/sql/stock_take.0008.sql``): the conditional UPDATE of
one segment and its ledger row. The orders app's ``flashsale_purchase`` calls it."""

from pathlib import Path

from django.db import migrations

SQL = Path(__file__).resolve().parent.parent / "sql" / "stock_take.0008.sql"


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0007_payment_window"),
    ]

    operations = [
        migrations.RunSQL(["DROP PROCEDURE IF EXISTS flashsale_stock_take", SQL.read_text()],
                          ["DROP PROCEDURE IF EXISTS flashsale_stock_take"]),
    ]
