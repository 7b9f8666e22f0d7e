"""Keys compare byte for byte, as in Redis: a binary, NO PAD collation instead of
the database's utf8mb4_general_ci (case folded, trailing spaces ignored). Going
forward rebuilds each table; no row can collide, since the new collation only tells
more keys apart. Going back fails if keys differing only in case were written."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0005_product_strategy'),
    ]

    operations = [
        migrations.AlterField(
            model_name='product',
            name='sku',
            field=models.CharField(db_collation='utf8mb4_nopad_bin', max_length=64, unique=True),
        ),
        migrations.AlterField(
            model_name='stockflow',
            name='operation_flag',
            field=models.CharField(db_collation='utf8mb4_nopad_bin', max_length=128),
        ),
    ]
