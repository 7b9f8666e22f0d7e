"""Reads of products, stock and the ledger, and the audit of the sale's invariants."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass
from datetime import datetime

from django.db.models import Count, Sum

from flashsale.errors import NotFound
from flashsale.strategies import strategy_of

from .models import Product, Stock, StockFlow


def _not_found(sku: str) -> NotFound:
    return NotFound(f"no product with sku {sku!r}", extra={"sku": sku})


def product_get(*, sku: str) -> Product:
    try:
        return Product.objects.get(sku=sku)
    except Product.DoesNotExist:
        raise _not_found(sku) from None


def segments_get(*, sku: str) -> list[Stock]:
    """The product's stock segments (each with its product), in segment order: one
    plain read, no row lock, so the quantities are what they were, not what they are."""
    segments = list(Stock.objects.select_related("product").filter(product__sku=sku).order_by("segment"))
    if not segments:
        raise _not_found(sku)
    return segments


@dataclass(frozen=True)
class ProductStock:
    sku: str
    name: str
    stock: int
    initial_stock: int
    segments: int
    starts_at: datetime | None = None  # the sale's window (None: from the reset; for ever)
    ends_at: datetime | None = None
    strategy: str = ""  # the strategy its sale runs under (its own, or the deployment's)


def product_stock_get(*, sku: str) -> ProductStock:
    """A product with its stock summed over its segments."""
    segments = segments_get(sku=sku)
    product = segments[0].product
    return ProductStock(sku=product.sku, name=product.name,
                        stock=sum(s.quantity for s in segments),
                        initial_stock=sum(s.initial_quantity for s in segments),
                        segments=len(segments), starts_at=product.starts_at, ends_at=product.ends_at,
                        strategy=strategy_of(product.strategy).name)


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
    segments_remaining: tuple[int, ...] = ()  # what each segment has left, in segment order

    def as_dict(self) -> dict:
        return asdict(self)


def stock_audit(*, product: Product, ordered_quantity: int, order_references: Collection[str]) -> StockAudit:
    """Check the sale's invariants against what the orders side says was sold.

    ``order_references`` are the ids of the product's orders (as the ledger
    records them): the ledger must hold a row for each (one per segment the order
    took from), and no row for anything else. Oversell and lost updates are the
    product's, over all its segments.
    """
    segments = Stock.objects.filter(product=product).order_by("segment")
    initial = sum(s.initial_quantity for s in segments)
    remaining = [s.quantity for s in segments]
    flows = StockFlow.objects.filter(product=product)
    totals = flows.aggregate(rows=Count("id"), quantity=Sum("quantity"))
    flow_rows, flow_quantity = totals["rows"], totals["quantity"] or 0
    referenced = set(flows.values_list("order_reference", flat=True))

    sold = initial - sum(remaining)
    oversold = max(0, ordered_quantity - initial)
    lost_updates = ordered_quantity - sold
    one_to_one = flow_rows >= len(order_references) and referenced == set(order_references)
    return StockAudit(
        sku=product.sku,
        initial_stock=initial,
        remaining=sum(remaining),
        orders=len(order_references),
        ordered_quantity=ordered_quantity,
        flow_rows=flow_rows,
        flow_quantity=flow_quantity,
        oversold=oversold,
        lost_updates=lost_updates,
        consistent=(
            oversold == 0 and lost_updates == 0 and one_to_one and flow_quantity == ordered_quantity
        ),
        segments_remaining=tuple(remaining),
    )


def flows_remaining(*, operation_flag: str) -> int:
    """What the segments an operation took from had left right after it (its
    answer's ``remaining``, read back for a replay)."""
    return StockFlow.objects.filter(operation_flag=operation_flag).aggregate(
        left=Sum("quantity_after"))["left"] or 0


def flows_after(*, product: Product) -> dict[str, int]:
    """What each operation left of the product's stock, by operation flag, for a
    product in one segment (the gate's): its answers' ``remaining``."""
    return dict(StockFlow.objects.filter(product=product).values_list("operation_flag", "quantity_after"))
