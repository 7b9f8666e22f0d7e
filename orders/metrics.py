"""The purchase's metrics: every answer counted where it is made, by the strategy its
product's sale runs under and the answer's code (``common.metrics`` serves them).

Counted in the view and in the WSGI shortcut alike (``orders.wsgi``): a middleware
would never see the shortcut's answers. A refusal is counted under the strategy this
process last resolved for the product; one that came before any was (a malformed
body, a throttle, an unknown product) is ``unresolved``.
"""

from __future__ import annotations

import time

from django.conf import settings
from prometheus_client import Counter, Histogram

from common.metrics import count, observe_later

from .resolve import strategy_remembered

PURCHASES = Counter(
    "flashsale_purchases",
    "Purchases answered, by the strategy of the product's sale and the answer's code: "
    "created, replayed, or the error's (sold_out, busy, throttled, invalid, ...)",
    ["strategy", "code"],
)
PURCHASE_SECONDS = Histogram(
    "flashsale_purchase_seconds",
    "Seconds from a purchase's arrival at the instance to its answer, by the strategy "
    "and whether the answer was an order created, a replay or a refusal",
    ["strategy", "answer"],
    # A purchase answers within the lock's wait and its deadline; a sale's answers take
    # milliseconds, and the gate's and a sold-out answer less than one: the lowest
    # buckets tell those apart.
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
             10),
)
UNRESOLVED = "unresolved"


def purchase_counted(*, sku: object, body: object, status: int, arrived: float | None) -> None:
    """Count one purchase's answer, and time it from ``arrived`` (epoch seconds; None:
    not timed). ``body`` is the answer's (the order, or the error's JSON).

    The count is written now, the time by the process's timings thread
    (``common.metrics.observe_later``): one write on the purchase's path."""
    if not settings.FLASHSALE_METRICS:
        return
    if status == 201:
        code = answer = "created"
    elif status == 200:
        code = answer = "replayed"
    else:
        answer = "refused"
        error = body.get("error") if isinstance(body, dict) else None
        code = error if isinstance(error, str) else f"http_{status}"
    strategy = body.get("strategy") if status in (200, 201) and isinstance(body, dict) else None
    if not isinstance(strategy, str):
        known = strategy_remembered(sku) if isinstance(sku, str) else None
        strategy = known or UNRESOLVED
    if arrived is not None:
        observe_later(PURCHASE_SECONDS, (strategy, answer), max(time.time() - arrived, 0.0))
    count(PURCHASES, strategy, code)  # never raises: the answer (an order committed) stands
