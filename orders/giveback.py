"""An order's units going back to its sale (an expiry, a refund) or taken out of it
again (a late payment), in the database, whichever seller holds the sale: the
ledger's flags for those moves, the order's one conditional move, and the return of
an order's units to the segments that hold them."""

from __future__ import annotations

from django.db import transaction

from inventory.models import Product, StockFlow
from inventory.services import Fence, Returned, stock_return

from .models import Order

# An order claimed to give its units back: (id, buyer, quantity, key), as its row holds them.
Claimed = tuple[int, str, int, str]


class OrderChanged(Exception):
    """The order's status changed between the read and the conditional move: the
    transaction is rolled back and the event dispatched again."""


def order_moved(order_id: int, before: str, after: str) -> bool:
    """The order's one conditional move: whatever moved it first, this one matches nothing."""
    return bool(Order.objects.filter(pk=order_id, status=before).update(status=after))


def refund_flag(order_id: int) -> str:
    """The ledger's operation flag for the return of a refunded paid order's units."""
    return f"refund {order_id}"


def return_flag(order_id: int) -> str:
    """The ledger's operation flag for the return of an order's units. A space, which
    no Idempotency-Key holds (visible ASCII only), keeps it apart from every sale's."""
    return f"return {order_id}"


def resale_flag(order_id: int) -> str:
    """The ledger's operation flag of a late payment's units, taken again (a space:
    no Idempotency-Key holds one)."""
    return f"resale {order_id}"


def read_committed() -> None:
    """The next transaction on this connection under READ COMMITTED: the claim then
    locks the due orders only, not the gap where purchases insert new ones."""
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")  # the next one only


def units_return(product: Product, claimed: list[Claimed], fences: dict[int, Fence] | None, *,
                 refunded: bool = False) -> int:
    """Return each order's units to the segments the sale rows holding them took them
    from: a late payment's (``resale <id>``) if it has them, else its purchase's (a
    sale's flag is its order's key)."""
    order_of = {key: pk for pk, _, _, key in claimed} | {resale_flag(pk): pk for pk, *_ in claimed}
    taken = list(StockFlow.objects.filter(product=product, kind=StockFlow.Kind.SALE,
                                          operation_flag__in=order_of)
                 .values_list("operation_flag", "order_reference", "segment", "quantity"))
    resold = {order_of[flag] for flag, *_ in taken if flag == resale_flag(order_of[flag])}
    flag_of = refund_flag if refunded else return_flag
    returned = []
    for flag, reference, segment, quantity in taken:
        order = order_of[flag]
        if (flag == resale_flag(order)) == (order in resold):  # the rows that hold its units now
            returned.append(Returned(segment=segment, quantity=quantity, operation_flag=flag_of(order),
                                     order_reference=reference))
    stock_return(product=product, returned=returned, fences=fences)
    return sum(r.quantity for r in returned)
