"""Writes to the stock: the deduction (the critical section) and the reset."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import transaction
from django.db.models import F

from flashsale.errors import SoldOut, StockChanged
from flashsale.strategies import Deduction

from .models import Product, Stock, StockFlow


def _widen_race() -> None:
    # Stands for the business work a real critical section does (pricing, coupons,
    # calls out); without it two cores rarely interleave and oversell hides.
    delay_ms = settings.FLASHSALE_RACE_DELAY_MS
    if delay_ms > 0:
        time.sleep(delay_ms / 1000)


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
) -> int:
    """Take ``quantity`` off the product's stock and append its stock-flow row.

    The critical section of a purchase. Must run inside the caller's transaction
    and, for read-modify-write, under whatever lock the strategy provides: the
    read, the check and the write are deliberately separate statements.

    :returns: the stock left, as this writer computed it.
    :raises SoldOut: not enough stock; nothing is written.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("stock_deduct must run inside transaction.atomic()")

    if deduction is Deduction.CONDITIONAL_UPDATE:
        updated = Stock.objects.filter(product=product, quantity__gte=quantity).update(
            quantity=F("quantity") - quantity, version=F("version") + 1
        )
        if not updated:
            available = Stock.objects.values_list("quantity", flat=True).get(product=product)
            raise _sold_out(product, quantity, available)
        # The row is ours until commit, so this read sees our own write.
        after = Stock.objects.values_list("quantity", flat=True).get(product=product)
        before = after + quantity
        _widen_race()  # same work inside the section as the other strategies
    elif deduction in (Deduction.READ_MODIFY_WRITE, Deduction.VERSIONED):
        stock = Stock.objects.get(product=product)  # plain read: no row lock
        before = stock.quantity
        if before < quantity:
            raise _sold_out(product, quantity, before)
        _widen_race()
        if deduction is Deduction.READ_MODIFY_WRITE:
            stock.quantity = before - quantity
            stock.version += 1
            # Writes the value computed above, whatever the row holds by now.
            stock.save(update_fields=["quantity", "version"])
        else:
            updated = Stock.objects.filter(
                pk=stock.pk, version=stock.version, quantity__gte=quantity
            ).update(quantity=F("quantity") - quantity, version=F("version") + 1)
            if not updated:
                # Someone wrote since our read. Re-reading in this transaction would
                # show the same snapshot (REPEATABLE READ): the caller retries anew.
                raise StockChanged(f"{product.sku}: stock changed since it was read",
                                   extra={"sku": product.sku})
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
    return after


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
        defaults={"quantity": stock, "initial_quantity": stock, "version": 0},
    )
    return product
