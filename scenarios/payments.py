"""The sale after its 201 (issue "pay or release"): unpaid orders expire and their
units go back on sale, a payment may come late. Three ways well-known projects get it
wrong, each beside flashsale's way (``payments``), on the real MariaDB and Redis.

They use the Django models, so the runner sets Django up first; the imports of
models happen inside the functions for that reason.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from .base import Half, Outcome, Scenario
from .context import Context

STOCK, UNPAID = 10, 5
WINDOW_S = 60


def _due():
    """A moment past every window this module opens, and its grace."""
    from django.conf import settings
    from django.utils import timezone

    return timezone.now() + timedelta(seconds=WINDOW_S + settings.FLASHSALE_PAYMENT_GRACE_S + 1)


def _sold_out_sale(prefix: str) -> tuple[str, list[int]]:
    """A sale of STOCK units with a payment window, bought out by STOCK buyers, and
    the first STOCK - UNPAID of them paid: its sku and its order ids."""
    from orders.purchase import order_create
    from orders.reset import sale_reset
    from payments.services import order_pay

    sku = f"{prefix}-{uuid.uuid4().hex[:8]}"
    sale_reset(sku=sku, stock=STOCK, strategy="atomic", payment_window_s=WINDOW_S)
    orders = [order_create(sku=sku, quantity=1, user_id=f"u{i}", idempotency_key=f"{sku}-{i}").order_id
              for i in range(STOCK)]
    for order_id in orders[:STOCK - UNPAID]:
        order_pay(order_id=order_id)
    return sku, orders


def _resold(sku: str, buyers: int) -> int:
    """New buyers try the sale once each: how many bought."""
    from common.errors import SoldOut
    from orders.purchase import order_create

    bought = 0
    for i in range(buyers):
        try:
            order_create(sku=sku, quantity=1, user_id=f"later-{i}", idempotency_key=f"{sku}-later-{i}")
            bought += 1
        except SoldOut:
            pass
    return bought


def _held(sku: str) -> dict:
    """What the orders hold against the stock, as a buyer would count it: every order
    that has not expired holds its units."""
    from inventory.models import Stock
    from orders.models import Order

    orders = Order.objects.filter(product__sku=sku)
    held = sum(o.quantity for o in orders if o.status in Order.HOLDING_STOCK)
    first = sum(Stock.objects.filter(product__sku=sku).values_list("initial_quantity", flat=True))
    return {"units held by orders": held, "oversold": max(0, held - first)}


def s21_return_without_the_order(ctx: Context) -> Outcome:
    from django.db import transaction
    from django.db.models import F

    from inventory.models import Stock
    from orders.models import Order
    from orders.salestate import sale_state_returned
    from payments.expiry import orders_expire

    def naive_expiry_job(sku: str) -> int:
        """cuckoo's timeout job: the order marked expired with a plain save, then its
        units returned by an increment that never sees which order they were."""
        returned = 0
        due = _due()
        for order in Order.objects.filter(product__sku=sku, status__in=["pending", "expired"],
                                          expires_at__lte=due):
            with transaction.atomic():
                order.status = "expired"
                order.save(update_fields=["status"])
                Stock.objects.filter(product=order.product).update(quantity=F("quantity") + order.quantity)
            returned += order.quantity
        sale_state_returned(sku=sku)  # the sale sells again, as its own job would let it
        return returned

    sku, _ = _sold_out_sale("s21-naive")
    returned = naive_expiry_job(sku) + naive_expiry_job(sku)  # run twice: a retry, or two instances
    figures = {"stock": STOCK, "unpaid orders": UNPAID, "expiry runs": 2, "units returned": returned,
               "resold": _resold(sku, 2 * UNPAID), **_held(sku)}
    broken = Half("a plain save, then an increment without the order", figures,
                  failed=figures["units returned"] > UNPAID or figures["oversold"] > 0)

    sku, _ = _sold_out_sale("s21-fixed")
    returned = orders_expire(now=_due(), sku=sku).units + orders_expire(now=_due(), sku=sku).units
    figures = {"stock": STOCK, "unpaid orders": UNPAID, "expiry runs": 2, "units returned": returned,
               "resold": _resold(sku, 2 * UNPAID), **_held(sku)}
    fixed = Half("a conditional move, a return row keyed by the order", figures,
                 failed=figures["units returned"] != UNPAID or figures["oversold"] != 0)
    return Outcome(broken, fixed)


def s22_expiry_by_id_races_a_payment(ctx: Context) -> Outcome:
    from django.db import transaction
    from django.db.models import F

    from inventory.models import Stock
    from orders.models import Order
    from orders.salestate import sale_state_returned
    from payments.expiry import orders_expire
    from payments.services import order_pay

    def sale(by_id_only: bool) -> dict:
        from orders.purchase import order_create
        from orders.reset import sale_reset

        sku = f"s22-{uuid.uuid4().hex[:8]}"
        sale_reset(sku=sku, stock=STOCK, strategy="atomic", payment_window_s=WINDOW_S)
        orders = [order_create(sku=sku, quantity=1, user_id=f"u{i}", idempotency_key=f"{sku}-{i}").order_id
                  for i in range(STOCK)]
        # The expirer reads its candidates: every order, unpaid and due...
        pending = Order.objects.filter(product__sku=sku, status="pending")
        candidates = list(pending.values_list("pk", flat=True))
        # ...then half of their buyers' payments land...
        paid = [order_id for order_id in orders[:UNPAID] if order_pay(order_id=order_id) == "paid"]
        if by_id_only:
            # ...and Saleor's expiry updates by id alone, re-checking nothing.
            with transaction.atomic():
                Order.objects.filter(pk__in=candidates).update(status="expired")
                Stock.objects.filter(product__sku=sku).update(quantity=F("quantity") + len(candidates))
            sale_state_returned(sku=sku)
        else:
            orders_expire(now=_due(), sku=sku)
        statuses = dict(Order.objects.filter(pk__in=orders).values_list("pk", "status"))
        lost = sum(statuses[order_id] == "expired" for order_id in paid)
        resold = _resold(sku, STOCK)
        held = _held(sku)
        return {"orders": STOCK, "paid while the expirer decided": len(paid),
                "paid, then marked expired": lost,
                "units returned": sum(s == "expired" for s in statuses.values()), "resold": resold,
                # The paid buyers whose orders were marked expired still paid for theirs.
                "units buyers paid for or hold": held["units held by orders"] + lost,
                "oversold": max(0, held["units held by orders"] + lost - STOCK)}

    figures = sale(by_id_only=True)
    broken = Half("candidates read, then updated by id only", figures,
                  failed=figures["paid, then marked expired"] > 0)
    figures = sale(by_id_only=False)
    fixed = Half("one conditional move each (WHERE status = 'pending')", figures,
                 failed=figures["paid, then marked expired"] != 0 or figures["oversold"] != 0)
    return Outcome(broken, fixed)


def s23_late_payment_without_the_stock(ctx: Context) -> Outcome:
    from common.strategies import strategy_of
    from orders.models import Order
    from orders.sellers import seller_of
    from payments.expiry import orders_expire

    def sale(recheck: bool) -> dict:
        sku, orders = _sold_out_sale(f"s23-{'fixed' if recheck else 'naive'}")
        orders_expire(now=_due(), sku=sku)  # the unpaid half's units back on sale
        resold = _resold(sku, UNPAID)  # and sold again
        late = orders[STOCK - UNPAID:]  # their buyers' payments, confirmed now
        refunded = 0
        for order_id in late:
            if recheck:
                order = Order.objects.select_related("product").get(pk=order_id)
                if seller_of(strategy_of(order.product.strategy)).take_again(order) is None:
                    Order.objects.filter(pk=order_id, status="expired").update(status="refunded")
                    refunded += 1
            else:  # codingXiaxw/seckill#41: the payment marks the order paid, whatever became of its units
                Order.objects.filter(pk=order_id).update(status="paid")
        return {"stock": STOCK, "expired, then resold": resold, "late payments": len(late),
                "refunded": refunded, **_held(sku)}

    figures = sale(recheck=False)
    broken = Half("a late payment marks the order paid", figures, failed=figures["oversold"] > 0)
    figures = sale(recheck=True)
    fixed = Half("it takes the units again under the sale's strategy, or is refunded", figures,
                 failed=figures["oversold"] != 0 or figures["refunded"] != UNPAID)
    return Outcome(broken, fixed)


SCENARIOS = [
    Scenario("S21", "an expiry that returns stock without the order's id, run twice",
             "pingxin403/cuckoo's timeout job",
             "10 units bought out, 5 never paid. The expiry job saves each order expired and "
             "increments the stock by its quantity, knowing nothing of which order it returns; a "
             "second run (a retry, a second instance) returns the same units again, and new "
             "buyers buy more than the stock.", s21_return_without_the_order, needs=("mysql", "redis")),
    Scenario("S22", "an expiry by id only, racing a payment", "Saleor's _expire_orders",
             "The expirer reads its candidates, every unpaid order; half of their payments land; "
             "then it marks the candidates expired by id alone. Paid orders end expired, their units "
             "back on sale and sold to someone else.", s22_expiry_by_id_races_a_payment,
             needs=("mysql", "redis")),
    Scenario("S23", "a late payment that does not re-check the stock",
             "codingXiaxw/seckill#41; pretix re-checks the quota",
             "5 orders expire and their units sell again; then their payments are confirmed. "
             "Marked paid as they are, they hold units the stock no longer has.",
             s23_late_payment_without_the_stock, needs=("mysql", "redis")),
]
