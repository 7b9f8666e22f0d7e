"""The payment step's metrics (labels: a strategy; never a sku, a buyer or an order)."""

from prometheus_client import Counter, Gauge

EXPIRED = Counter("flashsale_orders_expired", "Orders moved from pending to expired, unpaid, by the "
                  "strategy of their sale", ["strategy"])
RETURNED_UNITS = Counter("flashsale_units_returned", "Units given back to their sale (of expired orders, "
                         "and of paid orders refunded at the provider), by strategy", ["strategy"])
PAID = Counter("flashsale_orders_paid", "Orders moved from pending to paid, by strategy", ["strategy"])
LATE = Counter("flashsale_late_payments", "Payments confirmed for expired orders, by outcome: paid "
               "(the units taken again) or refunded (none left)", ["outcome"])
BATCH_IN_HAND = Gauge("flashsale_expiry_batch_orders", "Orders in the expirer's batch in hand: claimed, "
                      "their units not yet back everywhere (0 between batches)")
REFUNDS = Counter("flashsale_payments_refunded", "Payments given back, by why: late (the order's units "
                  "were sold again) or other (the order paid already, or gone)", ["why"])
REFUSED_EVENTS = Counter("flashsale_webhook_events_refused", "Signed provider events refused: the "
                         "payment they name is not one the shop made for that order, or not for that "
                         "amount and currency (nothing moved), by event type", ["type"])
