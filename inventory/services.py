"""Writes to the stock: the deduction (the critical section) and the reset."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import NamedTuple, Protocol

from django.conf import settings
from django.db import transaction
from django.db.models import F, Func, PositiveIntegerField, QuerySet

from common.bulk import rows_insert
from common.errors import SaleReplaced, SoldOut, StaleLock, StockChanged
from common.strategies import Deduction

from .faults import section_delay, stall_point
from .limits import MAX_SEGMENTS
from .models import Product, Stock, StockFlow


class Fence(NamedTuple):
    """A lock holder's fencing token, and the lock that issued it."""

    source: str
    token: int


class Deducted(NamedTuple):
    """What a deduction left, and since when (``time.perf_counter()``) this
    transaction has held the stock row: from its first write to it until commit,
    nobody else can write the row. The hold time the comparison reports."""

    remaining: int
    row_held_since: float


class _LastInsertId(Func):
    """``LAST_INSERT_ID(expr)``: MySQL returns the value in the statement's own reply
    (the insert id of the OK packet), so an UPDATE tells what it wrote or read
    without a second round trip while it holds the row."""

    function = "LAST_INSERT_ID"
    output_field = PositiveIntegerField()


def _last_insert_id() -> int:
    """The value the last statement's ``_LastInsertId`` handed back."""
    return int(transaction.get_connection().connection.insert_id())


def _fences_stamped(product: Product, segments: list[int], fences: Mapping[int, Fence],
                    ) -> tuple[dict[int, int], dict[int, int], float | None]:
    """The read of a fenced read-modify-write: each segment's row stamped with its
    holder's token, unless a newer holder of the same lock stamped it already, the
    stamp reading the quantity itself (the read, at no extra trip); each segment's
    quantity (no versions: the stamps hold the rows), and since when one is held.

    The stamp is the transaction's first write, so the row stays locked by it until
    commit: a newer holder's stamp waits, then reads what this one wrote. An older
    holder (its lease ran out while it stalled) finds a larger token and is refused
    before it reads anything. A token checked only at the write would leave a gap: a
    stale write landing between a newer holder's read and its write.

    :raises StaleLock: a newer holder stamped a segment first.
    :raises SaleReplaced: a row is not of ``product``'s sale as read (a reset).
    """
    available, held_since = {}, None
    for segment in segments:
        fence = fences[segment]
        stamped = (_sale_rows(product, segment)
                   .exclude(fence_source=fence.source, fence__gt=fence.token)
                   .update(fence_source=fence.source, fence=fence.token,
                           quantity=_LastInsertId(F("quantity"))))
        if not stamped:
            if not _sale_rows(product, segment).exists():
                raise SaleReplaced.of(product.sku)
            raise StaleLock(f"{product.sku}: the stock lock expired before this purchase touched the stock, "
                            "and a newer holder has; nothing was written",
                            extra={"sku": product.sku, "fence": fence.token})
        available[segment] = _last_insert_id()
        held_since = held_since or time.perf_counter()  # from the first stamp on
    return available, {}, held_since


def _sale_rows(product: Product, segment: int) -> QuerySet[Stock]:
    """The segment's row of ``product``'s sale as the caller read it (``Product.sale``):
    none once a reset made a new sale of the product. Every write of a purchase goes
    through it, so a purchase that checked the old sale's terms takes nothing from
    the new one."""
    return Stock.objects.filter(product=product, segment=segment, sale=product.sale)


def _stock_read(product: Product, segments: list[int]) -> tuple[dict[int, int], dict[int, int], None]:
    """The read of an unfenced deduction that is not one conditional UPDATE: each
    segment's quantity and version, by one plain SELECT (no row lock: the weak
    strategies' honest race); no row held yet.

    :raises SaleReplaced: a segment's row is of another sale now (a reset).
    """
    read = {segment: (quantity, version) for segment, quantity, version in
            Stock.objects.filter(product=product, segment__in=segments, sale=product.sale)
            .values_list("segment", "quantity", "version")}
    if len(read) < len(segments):
        raise SaleReplaced.of(product.sku)
    return ({segment: read[segment][0] for segment in segments},
            {segment: read[segment][1] for segment in segments}, None)


def _shares(available: dict[int, int], quantity: int) -> dict[int, int]:
    """How much to take from each segment, in the order given: each as much as it
    has, until the quantity is covered. Empty if the segments together cannot."""
    if sum(available.values()) < quantity:
        return {}
    shares, need = {}, quantity
    for segment, has in available.items():
        if need == 0:
            break
        if has:
            shares[segment] = min(has, need)
            need -= shares[segment]
    return shares


def _conditional_take(product: Product, segment: int, quantity: int) -> tuple[list[tuple[int, ...]], float]:
    """One segment's conditional UPDATE: what it took ((segment, quantity, before,
    after)), and since when it holds the row.

    :raises SoldOut: the segment has less than ``quantity``; nothing is written.
    :raises SaleReplaced: the segment's row is of another sale now; nothing is written.
    """
    updated = _sale_rows(product, segment).filter(quantity__gte=quantity).update(
        quantity=_LastInsertId(F("quantity") - quantity), version=F("version") + 1
    )
    if not updated:
        available = _sale_rows(product, segment).values_list("quantity", flat=True).first()
        if available is None:
            raise SaleReplaced.of(product.sku)
        raise SoldOut.short_of(product.sku, quantity, available)
    held_since = time.perf_counter()
    after = _last_insert_id()  # what the UPDATE wrote, from its own reply
    section_delay()  # same work inside the section as the other strategies
    return [(segment, quantity, after + quantity, after)], held_since


class Operation(NamedTuple):
    """What moves the stock, as the ledger's rows name it: its flag (the purchase's
    idempotency key, or another operation's) and the order it is for."""

    flag: str
    order_reference: str


def stock_deduct(
    *,
    product: Product,
    quantity: int,
    operation: Operation,
    deduction: Deduction,
    segments: Sequence[int] = (0,),
    fences: Mapping[int, Fence] | None = None,
) -> Deducted:
    """Take ``quantity`` off the product's stock, from the given ``segments`` (in
    that order, each as much as it has), and append a stock-flow row per segment
    taken from.

    The critical section of a purchase. Must run inside the caller's transaction
    and, for read-modify-write, under whatever lock the strategy provides for every
    segment given: the read, the check and the write are deliberately separate
    statements.

    With ``fences`` (each segment's lock holder's token), the read-modify-write
    first stamps each segment's row with its token and is refused if a newer token
    of the same lock got there first: this holder's lock expired and went to
    someone else.

    :returns: what the segments taken from have left, and since when this
        transaction holds a stock row.
    :raises SoldOut: the segments together do not have it; nothing is written.
    :raises StockChanged: a versioned write, or the conditional write of one of
        several segments, found the stock changed since it was read.
    :raises StaleLock: fenced out; nothing is written.
    :raises SaleReplaced: ``product``'s sale (its ``sale`` as the caller read it) was
        replaced by a reset; nothing is written.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("stock_deduct must run inside transaction.atomic()")
    if fences and deduction is not Deduction.READ_MODIFY_WRITE:
        raise ValueError("only the read-modify-write trusts a lock, so only it is fenced")
    segments = list(dict.fromkeys(segments))
    stall_point("start")
    held_since = None

    # Each statement below runs while this transaction holds a row, except the
    # plain reads: as few as the database allows, since every other buyer of the
    # segment waits for the commit.
    if deduction is Deduction.CONDITIONAL_UPDATE and len(segments) == 1:
        taken, held_since = _conditional_take(product, segments[0], quantity)
    else:
        available, versions, held_since = (_fences_stamped(product, segments, fences) if fences
                                           else _stock_read(product, segments))
        shares = _shares(available, quantity)
        if not shares:
            raise SoldOut.short_of(product.sku, quantity, sum(available.values()))
        section_delay()
        stall_point("read")
        taken = []
        for segment, share in shares.items():
            before = available[segment]
            rows = _sale_rows(product, segment)
            if deduction is Deduction.READ_MODIFY_WRITE:
                # Writes the value computed above, whatever the row holds by now.
                if not rows.update(quantity=before - share, version=F("version") + 1):
                    raise SaleReplaced.of(product.sku)  # a reset deleted it since the read
            else:
                # Versioned, or the conditional write of one of several segments: the
                # row must still hold what was read (or at least the share).
                if deduction is Deduction.VERSIONED:
                    rows = rows.filter(version=versions[segment])
                if not rows.filter(quantity__gte=share).update(quantity=F("quantity") - share,
                                                               version=F("version") + 1):
                    # Someone wrote since our read. Re-reading in this transaction would
                    # show the same snapshot (REPEATABLE READ): the caller retries anew.
                    raise StockChanged(f"{product.sku}: stock changed since it was read",
                                       extra={"sku": product.sku})
            held_since = held_since or time.perf_counter()
            taken.append((segment, share, before, before - share))

    rows_insert(StockFlow, _LEDGER, _ledger_rows(product, [(segment, share, *operation, before, after)
                                                           for segment, share, before, after in taken]))
    assert held_since is not None  # a deduction of a unit or more wrote a row
    return Deducted(remaining=sum(after for *_, after in taken), row_held_since=held_since)


class Decided(NamedTuple):
    """A deduction decided elsewhere (the gate's Redis script), to be recorded."""

    quantity: int
    operation_flag: str
    order_reference: str
    quantity_before: int  # the stock as the decider saw it
    quantity_after: int


def stock_record_decided(*, product: Product, decided: Sequence[Decided]) -> None:
    """Write deductions already decided (by the gate, in Redis) to the product's one
    stock row and its ledger: one conditional UPDATE for their total, one ledger row
    each, with the before/after the decider saw. Inside the caller's transaction.

    :raises SoldOut: the row has less than the total (the decider sold stock the
        database does not have: Redis lost writes); nothing is written.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("stock_record_decided must run inside transaction.atomic()")
    total = sum(d.quantity for d in decided)
    if not Stock.objects.filter(product=product, segment=0, quantity__gte=total).update(
            quantity=F("quantity") - total, version=F("version") + 1):
        available = Stock.objects.values_list("quantity", flat=True).get(product=product, segment=0)
        raise SoldOut.short_of(product.sku, total, available)
    rows = [(0, d.quantity, d.operation_flag, d.order_reference, d.quantity_before, d.quantity_after)
            for d in decided]
    rows_insert(StockFlow, _LEDGER, _ledger_rows(product, rows))


class Returned(NamedTuple):
    """Units going back to a segment, and the operation that returns them."""

    segment: int
    quantity: int
    operation_flag: str
    order_reference: str


def stock_return(*, product: Product, returned: Sequence[Returned],
                 fences: Mapping[int, Fence] | None = None) -> None:
    """Give units back to the product's segments (an unpaid order's, when it expires),
    with a ``return`` row in the ledger for each: one unconditional increment per
    segment for their total, in segment order. Inside the caller's transaction.

    An increment reads nothing, so the conditional and versioned deductions need no
    lock against it (the versioned one sees its version move and retries). A
    read-modify-write deduction does: one that read the stock before the increment
    would write over it. So under a lock strategy the caller holds the segments'
    locks, and with ``fences`` each row is stamped first, as a purchase stamps it.

    :raises IntegrityError: an operation flag was returned to a segment already
        (nothing of the transaction should stand).
    :raises StaleLock: fenced out; nothing is written.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("stock_return must run inside transaction.atomic()")
    by_segment: dict[int, list[Returned]] = {}
    for r in returned:
        by_segment.setdefault(r.segment, []).append(r)
    rows = []
    if fences:
        _fences_stamped(product, sorted(by_segment), fences)  # every row stamped before it is written
    for segment in sorted(by_segment):
        total = sum(r.quantity for r in by_segment[segment])
        Stock.objects.filter(product=product, segment=segment).update(
            quantity=_LastInsertId(F("quantity") + total), version=F("version") + 1)
        level = _last_insert_id() - total  # what the segment had before these returns
        for r in by_segment[segment]:
            rows.append((segment, r.quantity, r.operation_flag, r.order_reference, level, level + r.quantity))
            level += r.quantity
    rows_insert(StockFlow, _LEDGER, _ledger_rows(product, rows, kind=StockFlow.Kind.RETURN))


_LEDGER = ("product", "segment", "quantity", "operation_flag", "order_reference", "quantity_before",
           "quantity_after", "instance", "kind")  # a stock-flow row's columns, for rows_insert


def _ledger_rows(product: Product, rows: Iterable[tuple[int, int, str, str, int, int]],
                 kind: str = StockFlow.Kind.SALE) -> list[tuple[object, ...]]:
    """``_LEDGER``'s row per (segment, quantity, operation flag, order reference, before, after)."""
    return [(product.pk, *row, settings.FLASHSALE_INSTANCE, kind) for row in rows]


class _Random(Protocol):
    """What the plan asks of its random numbers: the random module or a seeded Random."""

    def randrange(self, stop: int, /) -> int: ...


def stock_plan(segments: Sequence[Stock], quantity: int, *, rng: _Random = random) -> list[list[int]]:
    """The groups of segments a purchase of ``quantity`` tries, in order, from a
    plain read of the product's ``segments``: first every segment that has enough
    alone, starting at a random one so buyers spread over the segments; when none
    does, the fewest that have it together (the fullest first), or, when the read
    says not even all of them do, all of them. The read only orders the tries: the
    deduction under the group's locks decides, and the last group is never empty.
    """
    singles = [s.segment for s in segments if s.quantity >= quantity]
    if singles:
        start = rng.randrange(len(singles))
        return [[segment] for segment in singles[start:] + singles[:start]]
    group, need = [], quantity
    for s in sorted(segments, key=lambda s: -s.quantity):
        group.append(s.segment)
        need -= s.quantity
        if need <= 0:
            break
    return [sorted(group)]


@transaction.atomic
# Past six parameters: a sale's terms, each a field of the reset API.
def product_reset(*, sku: str, stock: int, name: str | None = None, segments: int | None = None,  # noqa: PLR0913
                  starts_at: datetime | None = None, ends_at: datetime | None = None,
                  strategy: str = "", payment_window_s: int = 0, new: bool = False) -> Product:
    """Create the product or put it back to ``stock`` units with an empty ledger,
    split over ``segments`` rows (``FLASHSALE_STOCK_SEGMENTS`` when not given) as
    evenly as whole units allow, on sale from ``starts_at`` to ``ends_at`` (None:
    from now, for ever), under ``strategy`` ("": the deployment's), its orders to be
    paid within ``payment_window_s`` seconds (0: no payment step).

    ``new``: the caller found no such product, so there is nothing to delete. The
    deletes are left out because, for the newest product's id, they would lock the
    gaps at the end of the stock's and the ledger's indexes, where the previous
    product's purchases write: a deadlock with them.

    The caller clears anything else that refers to the product (orders) first.

    :raises IntegrityError: ``new``, but another transaction created the product.
    """
    segments = segments or settings.FLASHSALE_STOCK_SEGMENTS
    if not 1 <= segments <= MAX_SEGMENTS:
        raise ValueError(f"a product's stock has 1 to {MAX_SEGMENTS} segments, not {segments}")
    if new:
        product = Product.objects.create(sku=sku, name=name or sku, starts_at=starts_at, ends_at=ends_at,
                                         strategy=strategy, payment_window_s=payment_window_s)
    else:
        product, created = Product.objects.get_or_create(
            sku=sku, defaults={"name": name or sku, "starts_at": starts_at, "ends_at": ends_at,
                               "strategy": strategy, "payment_window_s": payment_window_s})
        if not created:
            product.name = name or product.name
            product.starts_at, product.ends_at, product.strategy = starts_at, ends_at, strategy
            product.payment_window_s = payment_window_s
            # A new sale's number, counted by the row itself: two resets at once get two.
            Product.objects.filter(pk=product.pk).update(
                name=product.name, starts_at=starts_at, ends_at=ends_at, strategy=strategy,
                payment_window_s=payment_window_s, sale=_LastInsertId(F("sale") + 1))
            product.sale = _last_insert_id()
        StockFlow.objects.filter(product=product).delete()
        Stock.objects.filter(product=product).delete()
    # A new sale starts a new fencing epoch (fence 0): the lock's counter may have
    # been reset too.
    Stock.objects.bulk_create([
        Stock(product=product, segment=n, quantity=size, initial_quantity=size, sale=product.sale)
        for n, size in enumerate(_split(stock, segments))
    ])
    return product


def _split(stock: int, parts: int) -> list[int]:
    """``stock`` in ``parts`` as equal as whole units allow, the larger ones first."""
    return [stock // parts + (1 if n < stock % parts else 0) for n in range(parts)]
