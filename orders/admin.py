from django.contrib import admin

from .models import Order


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ["id", "product", "quantity", "user_id", "instance", "strategy", "created_at"]
    list_filter = ["strategy", "instance"]
    search_fields = ["idempotency_key", "user_id"]
