"""An order's payment: its move from ``pending`` to ``paid``."""

from __future__ import annotations

from django.db import transaction

from common.errors import NotFound
from common.metrics import count
from orders.models import Order

from . import metrics


def order_pay(*, order_id: int) -> str:
    """Record that ``order_id`` was paid: ``pending`` → ``paid`` by one conditional
    UPDATE, so that whatever races it (the expirer's own conditional UPDATE, the same
    payment confirmed twice), the order ends paid or expired, never both, and is
    counted paid once. An order past its window that the expirer has not reached yet
    is still pending: paid in time.

    :returns: the order's status after: ``paid``, or what it was if the payment came
        too late (``expired``) or was not for a payment step (``placed``).
    :raises NotFound: no such order.
    """
    with transaction.atomic():
        pending = Order.objects.filter(pk=order_id, status=Order.Status.PENDING)
        moved = pending.update(status=Order.Status.PAID)
        found = Order.objects.filter(pk=order_id).values_list("status", "strategy").first()
    if found is None:
        raise NotFound(f"no order {order_id}", extra={"order_id": order_id})
    if moved:
        count(metrics.PAID, found[1])
    return found[0]
