"""Writes to the stock: the deduction (the critical section) and the reset."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import F, Func, PositiveIntegerField

from flashsale.errors import SoldOut, StaleLock, StockChanged
from flashsale.strategies import Deduction

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


_stalls = threading.local()


@contextmanager
def stalled(pause: Callable[[str], object]) -> Iterator[None]:
    """Fault injection: inside the block, this thread's critical sections call
    ``pause(point)`` at each point where a GC pause or a stopped VM could strike a
    lock holder: ``"start"`` (the lock is held, the stock not yet touched) and
    ``"read"`` (the stock was read, not yet written). Scenario S17 uses it."""
    _stalls.pause = pause
    try:
        yield
    finally:
        _stalls.pause = None


def _stall(point: str) -> None:
    pause = getattr(_stalls, "pause", None)
    if pause is not None:
        pause(point)


def _widen_race() -> None:
    # Stands for the business work a real critical section does (pricing, coupons,
    # calls out); without it two cores rarely interleave and oversell hides.
    delay_ms = settings.FLASHSALE_RACE_DELAY_MS
    if delay_ms > 0:
        time.sleep(delay_ms / 1000)


class _Remembered(Func):
    """``LAST_INSERT_ID(expr)``: MySQL returns the value in the statement's own reply
    (the insert id of the OK packet), so an UPDATE tells what it wrote or read
    without a second round trip while it holds the row."""

    function = "LAST_INSERT_ID"
    output_field = PositiveIntegerField()


def _remembered() -> int:
    """The value the last statement's ``_Remembered`` handed back."""
    return transaction.get_connection().connection.insert_id()


def _fence_stamp(product: Product, fence: Fence) -> int:
    """Stamp the stock row with this holder's token before reading it, unless a
    newer holder of the same lock has stamped it already.

    The stamp is the first write of the transaction, so the row stays locked by it
    until commit: a newer holder's stamp waits, then reads what this one wrote. An
    older holder (its lease ran out while it stalled) finds a larger token and is
    refused before it reads anything. Checking the token only at the write would
    leave a gap: a stale write landing between a newer holder's read and its write.

    :returns: the stock quantity, read by the stamp itself (the newest, since the
        stamp holds the row): the read of the read-modify-write, at no extra trip.
    """
    stamped = (Stock.objects.filter(product=product)
               .exclude(fence_source=fence.source, fence__gt=fence.token)
               .update(fence_source=fence.source, fence=fence.token,
                       quantity=_Remembered(F("quantity"))))
    if not stamped:
        raise StaleLock(
            f"{product.sku}: the stock lock expired before this purchase touched the stock, "
            "and a newer holder has; nothing was written",
            extra={"sku": product.sku, "fence": fence.token},
        )
    return _remembered()


def _sold_out(product: Product, quantity: int, available: int) -> SoldOut:
    return SoldOut(
        f"{product.sku}: {quantity} requested, {available} left",
        extra={"sku": product.sku, "requested": quantity, "remaining": available},
    )


def stock_deduct(
    *,
    product: Product,
    quantity: int,
    operation_flag: str,
    order_reference: str,
    deduction: Deduction,
    fence: Fence | None = None,
) -> Deducted:
    """Take ``quantity`` off the product's stock and append its stock-flow row.

    The critical section of a purchase. Must run inside the caller's transaction
    and, for read-modify-write, under whatever lock the strategy provides: the
    read, the check and the write are deliberately separate statements.

    With a ``fence`` (the lock holder's token), the read-modify-write first stamps
    the row with it and is refused if a newer token of the same lock got there
    first: this holder's lock expired and went to someone else.

    :returns: the stock left, as this writer computed it, and since when the row is held.
    :raises SoldOut: not enough stock; nothing is written.
    :raises StaleLock: fenced out; nothing is written.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("stock_deduct must run inside transaction.atomic()")
    if fence is not None and deduction is not Deduction.READ_MODIFY_WRITE:
        raise ValueError("only the read-modify-write trusts a lock, so only it is fenced")
    _stall("start")
    held_since = None
    stamped_quantity = None
    if fence is not None:
        stamped_quantity = _fence_stamp(product, fence)
        held_since = time.perf_counter()

    # Each statement below runs while this transaction holds the row, except the
    # plain reads: as few as the database allows, since every other buyer of the
    # product waits for the commit.
    if deduction is Deduction.CONDITIONAL_UPDATE:
        updated = Stock.objects.filter(product=product, quantity__gte=quantity).update(
            quantity=_Remembered(F("quantity") - quantity), version=F("version") + 1
        )
        if not updated:
            available = Stock.objects.values_list("quantity", flat=True).get(product=product)
            raise _sold_out(product, quantity, available)
        held_since = time.perf_counter()
        after = _remembered()  # what the UPDATE wrote, from its own reply
        before = after + quantity
        _widen_race()  # same work inside the section as the other strategies
    elif deduction is Deduction.READ_MODIFY_WRITE:
        # The read: the stamp's, or a plain SELECT (no row lock) without a fence.
        before = (stamped_quantity if stamped_quantity is not None
                  else Stock.objects.values_list("quantity", flat=True).get(product=product))
        if before < quantity:
            raise _sold_out(product, quantity, before)
        _widen_race()
        _stall("read")
        # Writes the value computed above, whatever the row holds by now.
        Stock.objects.filter(product=product).update(quantity=before - quantity,
                                                     version=F("version") + 1)
        held_since = held_since or time.perf_counter()
        after = before - quantity
    elif deduction is Deduction.VERSIONED:
        stock = Stock.objects.get(product=product)  # plain read: no row lock
        before = stock.quantity
        if before < quantity:
            raise _sold_out(product, quantity, before)
        _widen_race()
        _stall("read")
        updated = Stock.objects.filter(
            pk=stock.pk, version=stock.version, quantity__gte=quantity
        ).update(quantity=F("quantity") - quantity, version=F("version") + 1)
        if not updated:
            # Someone wrote since our read. Re-reading in this transaction would
            # show the same snapshot (REPEATABLE READ): the caller retries anew.
            raise StockChanged(f"{product.sku}: stock changed since it was read",
                               extra={"sku": product.sku})
        held_since = time.perf_counter()
        after = before - quantity
    else:
        raise ValueError(f"unknown deduction {deduction!r}")

    StockFlow.objects.create(
        product=product,
        quantity=quantity,
        operation_flag=operation_flag,
        order_reference=order_reference,
        quantity_before=before,
        quantity_after=after,
        instance=settings.FLASHSALE_INSTANCE,
    )
    return Deducted(remaining=after, row_held_since=held_since)


@transaction.atomic
def product_reset(*, sku: str, stock: int, name: str | None = None) -> Product:
    """Create the product or put it back to ``stock`` units with an empty ledger.

    The caller clears anything else that refers to the product (orders) first.
    """
    product, created = Product.objects.get_or_create(sku=sku, defaults={"name": name or sku})
    if name and not created and product.name != name:
        product.name = name
        product.save(update_fields=["name"])
    StockFlow.objects.filter(product=product).delete()
    Stock.objects.update_or_create(
        product=product,
        # A new sale starts a new fencing epoch: the lock's counter may have been reset too.
        defaults={"quantity": stock, "initial_quantity": stock, "version": 0,
                  "fence_source": "", "fence": 0},
    )
    return product
