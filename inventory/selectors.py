"""Reads of products, stock and the ledger, and the audit of the sale's invariants."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Count, Q, Sum
from django.db.models.expressions import Col

from common.errors import NotFound
from common.strategies import strategy_of

from .models import Product, Stock, StockFlow


def _not_found_error(sku: str) -> NotFound:
    return NotFound(f"no product with sku {sku!r}", extra={"sku": sku})


def product_get(*, sku: str) -> Product:
    try:
        return Product.objects.get(sku=sku)
    except Product.DoesNotExist:
        raise _not_found_error(sku) from None


def segments_get(*, sku: str) -> list[Stock]:
    """The product's stock segments (each with its product), in segment order: one
    plain read, no row lock, so the quantities are what they were, not what they are.

    Every purchase of a locked strategy begins with it, so its SQL is built once
    (``_SegmentsRead``), not by the ORM at every call: the ORM's query building was
    most of this read's CPU, and the read a large share of a whole purchase's
    (``python -m benchmarks.purchase_cpu``)."""
    segments = _segments_read.run(sku)
    if not segments:
        raise _not_found_error(sku)
    return segments


# What turns a column's value into the field's: the backend's converters, then the
# field's, each called as (value, expression, connection).
_Converter = Callable[[Any, Col, BaseDatabaseWrapper], Any]
_Converters = list[tuple[Col, list[_Converter]]]


class _SegmentsRead:
    """``Stock.objects.select_related("product").filter(product__sku=sku)
    .order_by("segment")``, its SQL built once from the models' fields, its rows made
    into instances as the ORM makes them: each value through the database backend's
    and the field's converters, then ``Model.from_db``. (A test holds it to the ORM
    query's answer.)"""

    _product_fields = [f.attname for f in Product._meta.concrete_fields]

    def __init__(self) -> None:
        self._built: dict[str, tuple[str, _Converters, list[str]]] = {}  # by database alias

    def _build(self, connection: BaseDatabaseWrapper) -> tuple[str, _Converters, list[str]]:
        def quote(column: str | None) -> str:
            if column is None:  # a concrete field has one
                raise TypeError("a field without a column")
            return connection.ops.quote_name(column)

        stock, product = Stock._meta, Product._meta
        columns: list[str] = []
        converters: _Converters = []
        for alias, meta in (("s", stock), ("p", product)):
            for field in meta.concrete_fields:
                columns.append(f"{alias}.{quote(field.column)}")
                col = field.get_col(alias)
                converters.append((col, [*connection.ops.get_db_converters(col),
                                         *col.get_db_converters(connection)]))
        sql = (f"SELECT {', '.join(columns)} FROM {quote(stock.db_table)} s "
               f"INNER JOIN {quote(product.db_table)} p "
               f"ON p.{quote(product.pk.column)} = s.{quote(stock.get_field('product').column)} "
               f"WHERE p.{quote(product.get_field('sku').column)} = %s "
               f"ORDER BY s.{quote(stock.get_field('segment').column)}")
        return sql, converters, [f.attname for f in stock.concrete_fields]

    def run(self, sku: str) -> list[Stock]:
        using = Stock.objects.db
        connection = connections[using]
        if using not in self._built:
            self._built[using] = self._build(connection)
        sql, converters, stock_fields = self._built[using]
        with connection.cursor() as cursor:
            cursor.execute(sql, [sku])
            rows = cursor.fetchall()
        segments, product = [], None
        split = len(stock_fields)
        for row in rows:
            values = [_converted(value, col, convs, connection)
                      for value, (col, convs) in zip(row, converters, strict=True)]
            if product is None:
                product = Product.from_db(using, self._product_fields, values[split:])
            segment = Stock.from_db(using, stock_fields, values[:split])
            segment.product = product  # as select_related leaves it: no query to reach it
            segments.append(segment)
        return segments


def _converted(value: Any, col: Col, converters: list[_Converter], connection: BaseDatabaseWrapper) -> Any:
    for convert in converters:
        value = convert(value, col, connection)
    return value


_segments_read = _SegmentsRead()


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
    payment_window_s: int = 0  # seconds an order has to be paid; 0: no payment step


def product_stock_get(*, sku: str) -> ProductStock:
    """A product with its stock summed over its segments."""
    segments = segments_get(sku=sku)
    product = segments[0].product
    return ProductStock(sku=product.sku, name=product.name,
                        stock=sum(s.quantity for s in segments),
                        initial_stock=sum(s.initial_quantity for s in segments),
                        segments=len(segments), starts_at=product.starts_at, ends_at=product.ends_at,
                        strategy=strategy_of(product.strategy).name,
                        payment_window_s=product.payment_window_s)


@dataclass(frozen=True)
class LedgerMatch:
    """What the ledger holds of a sale's orders, counted by the side that knows the
    orders: each must be named by a row (one per segment it took from), and every
    row must name one."""

    orders: int  # the sale's orders
    named: int  # of them, the orders some ledger row names
    naming_rows: int  # the ledger rows that name one of them


@dataclass(frozen=True)
class StockAudit:
    sku: str
    initial_stock: int
    remaining: int
    orders: int
    ordered_quantity: int  # units of the orders that hold stock: all but the expired (and refunded)
    flow_rows: int
    flow_quantity: int  # the ledger's net: units sold less units returned
    oversold: int
    lost_updates: int
    consistent: bool
    segments_remaining: tuple[int, ...] = ()  # what each segment has left, in segment order
    returned_quantity: int = 0  # units the ledger says went back on sale (expired orders')

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def stock_audit(*, product: Product, ordered_quantity: int, ledger: LedgerMatch) -> StockAudit:
    """Check the sale's invariants against what the orders side says is sold (the
    units of the orders that hold stock): a few aggregates, so the audit's memory
    does not grow with the sale. Oversell and lost updates are the product's, over
    all its segments; the ledger is one to one with the orders when every order is
    named and no row names anything else. With returns, what the stock lost is what
    the ledger sold less what it returned, and the orders that hold stock hold that:
    loaded = remaining + pending + paid.
    """
    segments = list(Stock.objects.filter(product=product).order_by("segment")
                    .values_list("quantity", "initial_quantity"))
    remaining = [left for left, _ in segments]
    initial = sum(start for _, start in segments)
    totals = StockFlow.objects.filter(product=product).aggregate(
        rows=Count("id"), units=Sum("quantity"),
        returned=Sum("quantity", filter=Q(kind=StockFlow.Kind.RETURN)))
    returned = totals["returned"] or 0
    flow_rows, flow_quantity = totals["rows"], (totals["units"] or 0) - 2 * returned

    sold = initial - sum(remaining)
    oversold = max(0, ordered_quantity - initial)
    lost_updates = ordered_quantity - sold
    one_to_one = ledger.named == ledger.orders and ledger.naming_rows == flow_rows
    return StockAudit(
        sku=product.sku,
        initial_stock=initial,
        remaining=sum(remaining),
        orders=ledger.orders,
        ordered_quantity=ordered_quantity,
        flow_rows=flow_rows,
        flow_quantity=flow_quantity,
        oversold=oversold,
        lost_updates=lost_updates,
        consistent=(
            oversold == 0 and lost_updates == 0 and one_to_one and flow_quantity == ordered_quantity
        ),
        segments_remaining=tuple(remaining),
        returned_quantity=returned,
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
