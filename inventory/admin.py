from django.contrib import admin

from .models import Product, Stock, StockFlow


@admin.register(Product)
class ProductAdmin(admin.ModelAdmin):
    list_display = ["sku", "name"]
    search_fields = ["sku", "name"]


@admin.register(Stock)
class StockAdmin(admin.ModelAdmin):
    list_display = ["product", "quantity", "initial_quantity", "version"]


@admin.register(StockFlow)
class StockFlowAdmin(admin.ModelAdmin):
    list_display = ["product", "quantity", "quantity_before", "quantity_after",
                    "operation_flag", "instance", "created_at"]
    list_filter = ["instance"]
