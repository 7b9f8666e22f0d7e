"""The purchase's procedure takes the sale whose terms the purchase checked
(``orders/transaction/sql/purchase.0013.sql``): a reset's new sale refuses it."""

from pathlib import Path

from django.db import migrations

SQL = Path(__file__).resolve().parent.parent / "transaction" / "sql"


class Migration(migrations.Migration):

    dependencies = [
        ("orders", "0012_order_request_id"),
        ("inventory", "0009_sale_number"),
    ]

    operations = [
        migrations.RunSQL(["DROP PROCEDURE IF EXISTS flashsale_purchase", (SQL / "purchase.0013.sql").read_text()],
                          ["DROP PROCEDURE IF EXISTS flashsale_purchase", (SQL / "purchase.0012.sql").read_text()]),
    ]
