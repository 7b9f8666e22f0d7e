"""Reads across orders and inventory: an order's status, and the audit of one sale:
in full (``sale_audit``, for the admin) and as its public summary (``sale_summary_get``)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Q, QuerySet, Sum

from common.errors import Busy, NotFound
from common.keys import key_sent
from common.memory import ProcessMemory
from common.strategies import strategy_of
from inventory.models import Product, StockFlow
from inventory.readcache import LogicalExpiry
from inventory.selectors import LedgerMatch, StockAudit, product_get, stock_audit

from .gate.store import ID_BLOCK_SHIFT
from .gate.tally import OrderStatus, gate_order_get, gate_tally
from .models import GateSale, Order
from .sellers import seller_of


def order_status_get(*, order_id: int, buyer: str | None = None) -> OrderStatus:
    """An order as the buyer can follow it: ``confirmed`` once the database has it,
    ``accepted`` while the gate's stream carries it to the database. With ``buyer``,
    only if it is that buyer's.

    :raises NotFound: neither has it, or it is another buyer's (the answer is the same).
    """
    order = Order.objects.select_related("product").filter(pk=order_id).first()
    found: OrderStatus | None
    if order is not None:
        found = OrderStatus(order_id=order.pk, sku=order.product.sku, quantity=order.quantity,
                            strategy=order.strategy, instance=order.instance, status="confirmed",
                            user_id=order.user_id, payment_status=order.status, expires_at=order.expires_at)
    else:
        found = gate_order_get(order_id=order_id)
    if found is None or buyer is not None and found.user_id != buyer:
        raise NotFound(f"no order {order_id}", extra={"order_id": order_id})
    return found


@dataclass(frozen=True)
class GateAudit:
    """The three places a gate sale lives, reconciled: Redis, its stream, MySQL.
    Redis's counts are ``GateTally``'s, each None when Redis lost the sale."""

    loaded: int  # the stock Redis was loaded with
    redis_remaining: int | None = None
    accepted: int | None = None
    accepted_quantity: int | None = None
    unacknowledged: int | None = None
    undelivered: int | None = None
    dead_lettered: int | None = None
    last_delivered: str | None = None
    returned: int | None = None
    retaken: int | None = None
    persisted: int = 0  # orders of this sale in MySQL
    backlog: int | None = None  # accepted, neither persisted nor dead-lettered yet
    # From accepted (the stream entry's time) to written (the row's), over the
    # persisted orders, in ms; None before the first is written.
    confirm_p50_ms: float | None = None
    confirm_p99_ms: float | None = None
    # Redis's stock and the stream agree (remaining + accepted - returned + retaken =
    # loaded), nothing waits to be written, and nothing was dead-lettered.
    reconciled: bool = False
    # Redis no longer holds the sale that MySQL's record says it was loaded with (a
    # restart without its append-only file, a flush of the gate's own database): of
    # its units, ``unknown_units`` are neither in MySQL nor anywhere the audit can
    # read. Accepted orders may have been lost with it. Redis's own counts are then
    # None: nobody knows them.
    redis_lost: bool = False
    unknown_units: int = 0
    sale: int | None = None  # the gate sale (its row's id) these counts are of


@dataclass(frozen=True)
class SaleAudit(StockAudit):
    retries: int = 0  # optimistic attempts that had to be redone, over all orders
    gate: GateAudit | None = None  # the gate's side, for a product sold through it
    starts_at: datetime | None = None  # the sale's window
    ends_at: datetime | None = None
    strategy: str = ""  # the strategy the sale runs under (the product's own, or the deployment's)
    # The orders by status: placed (no payment step), pending, paid, expired, refunded.
    orders_by_status: dict[str, int] = dataclasses.field(default_factory=dict)


class _SaleReplaced(Exception):
    """Redis holds another gate sale of the product than the audit's snapshot of the
    database names: a reconciliation or a reset committed between the two reads (Redis
    newer), or one committed its new sale in the database and is opening it in Redis
    (Redis older, until it has)."""


# How long an audit begins again while the two stores hold different sales, and how
# often: a reconciliation opens its sale in Redis within this (loading its orders'
# keys); past it, the answer is 503 busy.
AUDIT_SALE_WAIT_S = 3.0
AUDIT_SALE_POLL_S = 0.05


def _gate_audit(product: Product) -> GateAudit | None:
    tally = gate_tally(sku=product.sku)
    sale = GateSale.objects.filter(product=product).order_by("-pk").first()
    if sale is None or (tally is None and not seller_of(strategy_of(product.strategy)).in_redis):
        return None  # never sold through the gate, or since reset to another strategy
    first, past = sale.pk << ID_BLOCK_SHIFT, (sale.pk + 1) << ID_BLOCK_SHIFT  # the sale's ids
    if tally is not None and tally.sale not in (None, sale.pk):
        raise _SaleReplaced(product.sku)
    if tally is None:
        return _gate_lost(sale, Order.objects.filter(product=product, pk__gte=first, pk__lt=past))
    persisted, p50, p99 = _confirm_times(product.pk, first, past)
    backlog = tally.accepted - persisted - tally.dead_lettered
    sold = tally.accepted_quantity - tally.returned + tally.retaken
    reconciled = tally.redis_remaining + sold == tally.loaded and backlog == 0 and tally.dead_lettered == 0
    return GateAudit(**dataclasses.asdict(tally), persisted=persisted, backlog=backlog, reconciled=reconciled,
                     confirm_p50_ms=p50, confirm_p99_ms=p99)


# Over one sale's orders (their ids are its block; the gate's alone, which carry
# when it accepted them): how many, and the 50th and 99th percentiles, nearest rank,
# of accepted -> written. The database sorts once and sends two rows, so the audit's
# memory does not grow with the sale.
_CONFIRM_TIMES = """
    SELECT n, waited FROM (
        SELECT COUNT(*) OVER () AS n,
               ROW_NUMBER() OVER (ORDER BY TIMESTAMPDIFF(MICROSECOND, accepted_at, created_at)) AS place,
               TIMESTAMPDIFF(MICROSECOND, accepted_at, created_at) AS waited
        FROM {orders} WHERE product_id = %s AND id >= %s AND id < %s AND accepted_at IS NOT NULL
    ) ranked
    WHERE place IN (GREATEST(1, CEILING(n * 50 / 100)), GREATEST(1, CEILING(n * 99 / 100)))
    ORDER BY place"""


def _confirm_times(product_id: int, first_id: int, past_id: int) -> tuple[int, float | None, float | None]:
    with connection.cursor() as cursor:
        cursor.execute(_CONFIRM_TIMES.format(orders=Order._meta.db_table), [product_id, first_id, past_id])
        rows = cursor.fetchall()
    if not rows:
        return 0, None, None
    n, p50 = rows[0]
    p99 = rows[-1][1]  # the same row as p50's when the ranks meet
    return n, p50 / 1000, p99 / 1000


def _gate_lost(sale: GateSale, of_sale: QuerySet[Order]) -> GateAudit:
    """The gate's side of a sale whose keys Redis no longer holds, from MySQL's record
    of it: what it was loaded with and what of it was written. The rest's fate is
    unknown (sold and lost, or never sold), and the sale reconciles only when none is."""
    totals = of_sale.aggregate(orders=Count("pk"), quantity=Sum("quantity"))
    unknown = sale.loaded_stock - (totals["quantity"] or 0)
    return GateAudit(redis_remaining=None, loaded=sale.loaded_stock, accepted=None, accepted_quantity=None,
                     unacknowledged=None, undelivered=None, dead_lettered=None, returned=None, retaken=None,
                     persisted=totals["orders"],
                     backlog=None, reconciled=unknown == 0, redis_lost=True, unknown_units=unknown)



# The ledger rows of a product that name one of its orders, and the orders they
# name. A reference is the order's id in decimal: the join reads it as a number to
# find the order by its key (forced: for a small sale the planner would rather scan
# the product's orders for every row), then compares it byte for byte, so that "012"
# or "12 " names no order.
_LEDGER_MATCH = """
    SELECT COUNT(*), COUNT(DISTINCT o.id) FROM {flows} f
    JOIN {orders} o FORCE INDEX (PRIMARY)
      ON o.id = CAST(f.order_reference AS UNSIGNED) AND o.product_id = f.product_id
    WHERE f.product_id = %s AND CAST(f.order_reference AS BINARY) = CAST(o.id AS BINARY)"""


def _ledger_match(product: Product, orders: int) -> LedgerMatch:
    with connection.cursor() as cursor:
        cursor.execute(_LEDGER_MATCH.format(flows=StockFlow._meta.db_table, orders=Order._meta.db_table),
                       [product.pk])
        naming_rows, named = cursor.fetchone()
    return LedgerMatch(orders=orders, named=named, naming_rows=naming_rows)


def order_keys(*, sku: str) -> list[tuple[str, int]]:
    """Every order of the product: (the Idempotency-Key it was sent with, order id), in
    id order (a recorded history's final read)."""
    rows = (Order.objects.filter(product__sku=sku).order_by("id")
            .values_list("user_id", "idempotency_key", "id"))
    return [(key_sent(buyer, key) if settings.FLASHSALE_BUYER_AUTH else key, order_id)
            for buyer, key, order_id in rows]


def sale_audit(*, sku: str) -> SaleAudit:
    """The sale's invariants, read while it may still be selling: the database's
    side from one snapshot, the gate's (Redis) after it, so the backlog it reports is
    never less than the true one. Both reads are of one gate sale: if Redis holds a
    newer (or older) one than the snapshot names, the audit begins again; paired,
    the new sale's counts with the old one's orders would say an unwritten backlog
    was reconciled. A handful of aggregate queries: its memory is the same for a
    sale of 100 orders or 100,000.

    :raises Busy: the two stores still held different sales after
        ``AUDIT_SALE_WAIT_S`` (a reconciliation opening its sale in Redis).
    """
    deadline = time.monotonic() + AUDIT_SALE_WAIT_S
    while True:
        try:
            return _sale_audit_once(sku=sku)
        except _SaleReplaced:
            if time.monotonic() >= deadline:
                raise Busy(f"{sku}: its gate sale is being replaced (Redis and the database hold "
                           f"different sales); ask again") from None
            time.sleep(AUDIT_SALE_POLL_S)


@transaction.atomic  # one snapshot (REPEATABLE READ): orders, stock and ledger as of one moment
def _sale_audit_once(*, sku: str) -> SaleAudit:
    product = product_get(sku=sku)
    totals = Order.objects.filter(product=product).aggregate(
        orders=Count("pk"), retries=Sum("retries"),
        units=Sum("quantity", filter=Q(status__in=Order.HOLDING_STOCK)))
    audit = stock_audit(product=product, ordered_quantity=totals["units"] or 0,
                        ledger=_ledger_match(product, totals["orders"]))
    by_status = dict(Order.objects.filter(product=product).values_list("status")
                     .annotate(n=Count("pk")).values_list("status", "n"))
    gate = _gate_audit(product)
    fields = audit.as_dict()
    if gate is not None:
        fields["consistent"] = fields["consistent"] and gate.reconciled
    return SaleAudit(**fields, retries=totals["retries"] or 0, gate=gate,
                     starts_at=product.starts_at, ends_at=product.ends_at,
                     strategy=strategy_of(product.strategy).name, orders_by_status=by_status)


# sku -> its audit, for FLASHSALE_AUDIT_KEEP_MS. Only the audits of sales of
# FLASHSALE_AUDIT_KEEP_FROM_ORDERS orders or more are here: the few large ones.
_recent: ProcessMemory[str, SaleAudit] = ProcessMemory(
    "the audits of large sales", seconds=lambda: settings.FLASHSALE_AUDIT_KEEP_MS / 1000)


def sale_audit_recent(*, sku: str) -> SaleAudit:
    """The audit that the API answers: ``sale_audit``, or the same product's from at
    most FLASHSALE_AUDIT_KEEP_MS ago when its sale is large. An audit's cost grows
    with the sale's orders (its SQL reads them all), so a large sale is audited at
    most once per interval by this process, however many ask; a smaller one, whose
    buyer expects to see a purchase at once (the page reads the audit after each),
    is always audited as of now. Kept by size, not by the time an audit took: the
    first audits after a start are slow whatever the sale."""
    kept = _recent.get(sku)
    if kept is not None:
        return kept
    read = time.monotonic()
    audit = sale_audit(sku=sku)
    if audit.orders >= settings.FLASHSALE_AUDIT_KEEP_FROM_ORDERS:
        _recent.put(sku, audit, since=read)
    else:
        _recent.pop(sku)
    return audit


@dataclass(frozen=True)
class SaleSummary:
    """What anyone may know of a sale: its orders and units, and whether they add up."""

    sku: str
    initial_stock: int
    orders: int
    sold: int  # units, over every order
    remaining: int  # the stock left
    consistent: bool  # the full audit's verdict: orders within stock, ledger and stores agreeing
    as_of: datetime  # when the audit behind it was taken


def _summary_load(sku: str) -> SaleSummary:
    audit = sale_audit(sku=sku)
    return SaleSummary(sku=audit.sku, initial_stock=audit.initial_stock, orders=audit.orders,
                       sold=audit.ordered_quantity, remaining=audit.remaining, consistent=audit.consistent,
                       as_of=datetime.now().astimezone())


# One audit per half-period for every instance at once, whoever asks; an entry
# lives one period, so an answer is never older than that plus one audit.
_summaries = LogicalExpiry(load=_summary_load, key=lambda sku: f"sale-summary:{sku}",
                           fresh_s=lambda: settings.FLASHSALE_AUDIT_SUMMARY_MS / 2000,
                           keep_s=lambda: settings.FLASHSALE_AUDIT_SUMMARY_MS / 1000)


def sale_summary_get(*, sku: str) -> SaleSummary:
    """The sale's public summary, from the shared cache: at most
    ``FLASHSALE_AUDIT_SUMMARY_MS`` plus one audit old, whatever the sale's size and
    however many ask. A Redis that is slow or gone costs each process one audit a
    half-period, whoever asks, never the answer.

    :raises NotFound: no such product (not cached: the next reader asks again).
    """
    return _summaries.get(sku)
