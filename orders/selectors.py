"""Reads across orders and inventory: an order's status, and the audit of one sale."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Count, Sum

from flashsale.errors import NotFound
from flashsale.strategies import Seller, strategy_of
from inventory.selectors import StockAudit, product_get, stock_audit

from .figures import percentile
from .gate import ID_BLOCK_SHIFT, GateTally, OrderStatus, gate_order_get, gate_tally
from .models import GateSale, Order


def order_status_get(*, order_id: int) -> OrderStatus:
    """An order as the buyer can follow it: ``confirmed`` once the database has it,
    ``accepted`` while the gate's stream carries it to the database.

    :raises NotFound: neither has it.
    """
    order = Order.objects.select_related("product").filter(pk=order_id).first()
    if order is not None:
        return OrderStatus(order_id=order.pk, sku=order.product.sku, quantity=order.quantity,
                           strategy=order.strategy, instance=order.instance, status="confirmed")
    accepted = gate_order_get(order_id=order_id)
    if accepted is None:
        raise NotFound(f"no order {order_id}", extra={"order_id": order_id})
    return accepted


@dataclass(frozen=True)
class GateAudit(GateTally):
    """The three places a gate sale lives, reconciled: Redis, its stream, MySQL."""

    persisted: int = 0  # orders of this sale in MySQL
    backlog: int = 0  # accepted, neither persisted nor dead-lettered yet
    # From accepted (the stream entry's time) to written (the row's), over the
    # persisted orders, in ms; None before the first is written.
    confirm_p50_ms: float | None = None
    confirm_p99_ms: float | None = None
    # Redis's stock and the stream agree (remaining + accepted = loaded), nothing
    # waits to be written, and nothing was dead-lettered.
    reconciled: bool = False
    # Redis no longer holds the sale that MySQL's record says it was loaded with (a
    # restart without its append-only file, a flush of the gate's own database): of
    # its units, ``unknown_units`` are neither in MySQL nor anywhere the audit can
    # read. Accepted orders may have been lost with it. Redis's own counts are then
    # None: nobody knows them.
    redis_lost: bool = False
    unknown_units: int = 0


@dataclass(frozen=True)
class SaleAudit(StockAudit):
    retries: int = 0  # optimistic attempts that had to be redone, over all orders
    gate: GateAudit | None = None  # the gate's side, for a product sold through it
    starts_at: datetime | None = None  # the sale's window
    ends_at: datetime | None = None
    strategy: str = ""  # the strategy the sale runs under (the product's own, or the deployment's)


def _gate_audit(product) -> GateAudit | None:
    tally = gate_tally(sku=product.sku)
    sale = GateSale.objects.filter(product=product).order_by("-pk").first()
    if sale is None or (tally is None and strategy_of(product.strategy).seller is not Seller.GATE):
        return None  # never sold through the gate, or since reset to another strategy
    block = sale.pk << ID_BLOCK_SHIFT
    of_sale = Order.objects.filter(product=product, pk__gte=block, pk__lt=block + (1 << ID_BLOCK_SHIFT))
    if tally is None:
        return _gate_lost(sale, of_sale)
    times = list(of_sale.values_list("accepted_at", "created_at"))
    persisted = len(times)
    backlog = tally.accepted - persisted - tally.dead_lettered
    reconciled = (tally.redis_remaining + tally.accepted_quantity == tally.loaded
                  and backlog == 0 and tally.dead_lettered == 0)
    confirm = [(written - accepted).total_seconds() * 1000 for accepted, written in times]
    return GateAudit(**dataclasses.asdict(tally), persisted=persisted, backlog=backlog, reconciled=reconciled,
                     confirm_p50_ms=percentile(confirm, 50), confirm_p99_ms=percentile(confirm, 99))


def _gate_lost(sale: GateSale, of_sale) -> GateAudit:
    """The gate's side of a sale whose keys Redis no longer holds, from MySQL's record
    of it: what it was loaded with and what of it was written. The rest's fate is
    unknown (sold and lost, or never sold), and the sale reconciles only when none is."""
    totals = of_sale.aggregate(orders=Count("pk"), quantity=Sum("quantity"))
    unknown = sale.loaded_stock - (totals["quantity"] or 0)
    return GateAudit(redis_remaining=None, loaded=sale.loaded_stock, accepted=None, accepted_quantity=None,
                     unacknowledged=None, undelivered=None, dead_lettered=None, persisted=totals["orders"],
                     backlog=None, reconciled=unknown == 0, redis_lost=True, unknown_units=unknown)



@transaction.atomic  # one snapshot (REPEATABLE READ): orders, stock and ledger as of one moment
def sale_audit(*, sku: str) -> SaleAudit:
    """The sale's invariants, read while it may still be selling: the database's
    side from one snapshot, the gate's (Redis) after it, so the backlog it reports is
    never less than the true one."""
    product = product_get(sku=sku)
    orders = Order.objects.filter(product=product)
    totals = orders.aggregate(quantity=Sum("quantity"), retries=Sum("retries"))
    references = [str(pk) for pk in orders.values_list("pk", flat=True)]
    audit = stock_audit(product=product, ordered_quantity=totals["quantity"] or 0,
                        order_references=references)
    gate = _gate_audit(product)
    fields = audit.as_dict()
    if gate is not None:
        fields["consistent"] = fields["consistent"] and gate.reconciled
    return SaleAudit(**fields, retries=totals["retries"] or 0, gate=gate,
                     starts_at=product.starts_at, ends_at=product.ends_at,
                     strategy=strategy_of(product.strategy).name)
