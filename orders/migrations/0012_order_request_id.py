"""Each order keeps the name of the request that placed it (``request_id``), and the
purchase's procedure takes it (``orders/transaction/sql/purchase.0012.sql``)."""

from pathlib import Path

from django.db import migrations, models

SQL = Path(__file__).resolve().parent.parent / "transaction" / "sql"


class Migration(migrations.Migration):

    dependencies = [
        ('orders', '0011_purchase_procedure_files'),
    ]

    operations = [
        migrations.AddField(
            model_name='order',
            name='request_id',
            field=models.CharField(blank=True, db_default='', default='', max_length=64),
        ),
        migrations.RunSQL(["DROP PROCEDURE IF EXISTS flashsale_purchase", (SQL / "purchase.0012.sql").read_text()],
                          ["DROP PROCEDURE IF EXISTS flashsale_purchase", (SQL / "purchase.0011.sql").read_text()]),
    ]
