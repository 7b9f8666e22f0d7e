"""Reads across orders and inventory: the audit of one sale."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Sum

from inventory.selectors import StockAudit, product_get, stock_audit

from .models import Order


@dataclass(frozen=True)
class SaleAudit(StockAudit):
    retries: int = 0  # optimistic attempts that had to be redone, over all orders


def sale_audit(*, sku: str) -> SaleAudit:
    product = product_get(sku=sku)
    orders = Order.objects.filter(product=product)
    totals = orders.aggregate(quantity=Sum("quantity"), retries=Sum("retries"))
    references = [str(pk) for pk in orders.values_list("pk", flat=True)]
    audit = stock_audit(product=product, ordered_quantity=totals["quantity"] or 0,
                        order_references=references)
    return SaleAudit(**audit.as_dict(), retries=totals["retries"] or 0)
