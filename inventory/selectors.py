"""Reads of products, stock and the ledger, and the audit of the sale's invariants."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass

from django.db.models import Count, Sum

from flashsale.errors import NotFound

from .models import Product, Stock, StockFlow


def product_get(*, sku: str) -> Product:
    try:
        return Product.objects.select_related("stock").get(sku=sku)
    except Product.DoesNotExist:
        raise NotFound(f"no product with sku {sku!r}", extra={"sku": sku}) from None


def stock_get(*, product: Product) -> Stock:
    return Stock.objects.get(product=product)


@dataclass(frozen=True)
class StockAudit:
    sku: str
    initial_stock: int
    remaining: int
    orders: int
    ordered_quantity: int
    flow_rows: int
    flow_quantity: int
    oversold: int
    lost_updates: int
    consistent: bool

    def as_dict(self) -> dict:
        return asdict(self)


def stock_audit(*, product: Product, ordered_quantity: int, order_references: Collection[str]) -> StockAudit:
    """Check the sale's invariants against what the orders side says was sold.

    ``order_references`` are the ids of the product's orders (as the ledger
    records them): the ledger must hold exactly one row for each.
    """
    stock = stock_get(product=product)
    flows = StockFlow.objects.filter(product=product)
    totals = flows.aggregate(rows=Count("id"), quantity=Sum("quantity"))
    flow_rows, flow_quantity = totals["rows"], totals["quantity"] or 0
    referenced = set(flows.values_list("order_reference", flat=True))

    sold = stock.initial_quantity - stock.quantity
    oversold = max(0, ordered_quantity - stock.initial_quantity)
    lost_updates = ordered_quantity - sold
    one_to_one = flow_rows == len(order_references) and referenced == set(order_references)
    return StockAudit(
        sku=product.sku,
        initial_stock=stock.initial_quantity,
        remaining=stock.quantity,
        orders=len(order_references),
        ordered_quantity=ordered_quantity,
        flow_rows=flow_rows,
        flow_quantity=flow_quantity,
        oversold=oversold,
        lost_updates=lost_updates,
        consistent=(
            oversold == 0 and lost_updates == 0 and one_to_one and flow_quantity == ordered_quantity
        ),
    )


def flow_get(*, operation_flag: str) -> StockFlow | None:
    return StockFlow.objects.filter(operation_flag=operation_flag).first()
