"""Reads across orders and inventory: the audit of one sale."""

from __future__ import annotations

from django.db.models import Sum

from inventory.selectors import StockAudit, product_get, stock_audit

from .models import Order


def sale_audit(*, sku: str) -> StockAudit:
    product = product_get(sku=sku)
    orders = Order.objects.filter(product=product)
    ordered_quantity = orders.aggregate(q=Sum("quantity"))["q"] or 0
    references = [str(pk) for pk in orders.values_list("pk", flat=True)]
    return stock_audit(product=product, ordered_quantity=ordered_quantity, order_references=references)
