from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0004_product_sale_window'),
    ]

    operations = [
        migrations.AddField(
            model_name='product',
            name='strategy',
            field=models.CharField(blank=True, default='', max_length=32),
        ),
    ]
