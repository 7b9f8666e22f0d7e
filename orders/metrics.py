"""The purchase's metrics: every answer counted where it is made, by the strategy its
product's sale runs under and the answer's code (``common.metrics`` serves them).

Counted in the view and in the WSGI shortcut alike (``orders.wsgi``): a middleware
would never see the shortcut's answers. An answer that came before the strategy was
resolved (a malformed body, a throttle, an unknown product) is ``unresolved``.
"""

from __future__ import annotations

import time

from prometheus_client import Counter, Histogram

from .purchase import strategy_remembered

PURCHASES = Counter(
    "flashsale_purchases",
    "Purchases answered, by the strategy of the product's sale and the answer's code: "
    "created, replayed, or the error's (sold_out, busy, throttled, invalid, ...)",
    ["strategy", "code"],
)
PURCHASE_SECONDS = Histogram(
    "flashsale_purchase_seconds",
    "Seconds from nginx receiving a purchase (X-Request-Start) to its answer, by strategy",
    ["strategy"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)

UNRESOLVED = "unresolved"


def purchase_counted(*, sku: object, body: object, status: int, started: float | None) -> None:
    """Count one purchase's answer. ``body`` is the answer's (the order, or the error's
    JSON); ``started`` when nginx received it (None: not through nginx)."""
    if status == 201:
        code = "created"
    elif status == 200:
        code = "replayed"
    else:
        code = body.get("error") if isinstance(body, dict) else None
        code = code if isinstance(code, str) else f"http_{status}"
    strategy = body.get("strategy") if status in (200, 201) and isinstance(body, dict) else None
    if not isinstance(strategy, str):
        known = strategy_remembered(sku) if isinstance(sku, str) else None
        strategy = known or UNRESOLVED
    PURCHASES.labels(strategy, code).inc()
    if started is not None:
        PURCHASE_SECONDS.labels(strategy).observe(max(time.time() - started, 0.0))
