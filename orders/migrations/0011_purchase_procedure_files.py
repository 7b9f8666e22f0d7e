"""The purchase's stored procedure from ``orders/transaction/sql/purchase.0011.sql``: its
statements on the orders' tables, and a call to inventory's ``flashsale_stock_take``
for the stock's. Going back restores 0009's, which wrote the stock itself."""

import importlib
from pathlib import Path

from django.db import migrations

SQL = Path(__file__).resolve().parent.parent / "transaction" / "sql" / "purchase.0011.sql"
PREVIOUS = importlib.import_module("orders.migrations.0009_purchase_procedure_window").PROCEDURE


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0008_stock_take_procedure"),
        ("orders", "0010_order_due_by_product"),
    ]

    operations = [
        migrations.RunSQL(["DROP PROCEDURE IF EXISTS flashsale_purchase", SQL.read_text()],
                          ["DROP PROCEDURE IF EXISTS flashsale_purchase", PREVIOUS]),
    ]
