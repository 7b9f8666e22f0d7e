"""Each reset opens a numbered sale (``Product.sale``), and its stock rows carry the
number (``Stock.sale``): a purchase takes only from the rows of the sale whose terms
it checked. ``flashsale_stock_take`` (``inventory/sql/stock_take.0009.sql``) takes the
number too."""

from pathlib import Path

from django.db import migrations, models

SQL = Path(__file__).resolve().parent.parent / "sql"


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0008_stock_take_procedure"),
    ]

    operations = [
        migrations.AddField(model_name="product", name="sale", field=models.PositiveBigIntegerField(default=0)),
        migrations.AddField(model_name="stock", name="sale", field=models.PositiveBigIntegerField(default=0)),
        migrations.RunSQL(["DROP PROCEDURE IF EXISTS flashsale_stock_take", (SQL / "stock_take.0009.sql").read_text()],
                          ["DROP PROCEDURE IF EXISTS flashsale_stock_take", (SQL / "stock_take.0008.sql").read_text()]),
    ]
