"""What a gate sale rebuilt from the database (a reconciliation after a failover or
a restart, ``orders.gate.reconcile``; a warm-up after Redis lost the sale,
``orders.gate.lifecycle.gate_warm``) takes over of the product's orders."""

from __future__ import annotations

from typing import NamedTuple

from inventory.models import Product
from inventory.selectors import flows_after

from ..idempotency import request_fingerprint
from ..models import GateSale, Order


def replay_record(*, fingerprint: str, order_id: int, remaining: int, quantity: int, instance: str) -> str:
    """A key's replay record, as the script writes it."""
    return f"{fingerprint} {order_id} {remaining} {quantity} {instance}"


class OrdersLoaded(NamedTuple):
    """What a sale rebuilt from the database takes over of the product's orders, read
    in the transaction that reads the stock it loads (one snapshot)."""

    keys: dict[str, str]  # Idempotency-Key -> replay record: Redis answers for every order
    bought: dict[str, int]  # buyer -> units their live orders hold (the per-user limit)
    # order id -> "returned": an expired or refunded order, whose units are in the
    # stock loaded already; its return does nothing, a late payment takes them anew
    returns: dict[str, str]
    # The sales the orders were placed in: an order of one of them still pending is
    # the new sale's to give back when it expires (its units are not in the stock
    # loaded), and to take again when it is paid late.
    adopted: list[int]


def orders_loaded(product: Product) -> OrdersLoaded:
    """What a rebuilt sale of ``product`` takes over of its orders in the database.
    Call it in the transaction that reads the stock the sale loads: an expiry that
    commits between the two reads would leave its units in neither or in both."""
    after = flows_after(product=product)
    records: dict[str, str] = {}
    bought: dict[str, int] = {}
    returns: dict[str, str] = {}
    for order in Order.objects.filter(product=product):
        records[order.idempotency_key] = replay_record(
            fingerprint=request_fingerprint(sku=product.sku, quantity=order.quantity, user_id=order.user_id),
            order_id=order.pk, remaining=after.get(order.idempotency_key, 0), quantity=order.quantity,
            instance=order.instance)
        if order.status in Order.HOLDING_STOCK:  # an expired order's units left its buyer's count
            bought[order.user_id] = bought.get(order.user_id, 0) + order.quantity
        else:
            returns[str(order.pk)] = "returned"
    adopted = list(GateSale.objects.filter(product=product).values_list("pk", flat=True))
    return OrdersLoaded(records, bought, returns, adopted)


# --- the gate's sales outside a reset ---------------------------------------------------
