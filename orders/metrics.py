"""The purchase's metrics: every answer counted where it is made, by the strategy its
product's sale runs under and the answer's code (``common.metrics`` serves them).

Counted in the view and in the WSGI shortcut alike (``orders.wsgi``): a middleware
would never see the shortcut's answers. An answer that came before the strategy was
resolved (a malformed body, a throttle, an unknown product) is ``unresolved``.
"""

from __future__ import annotations

import logging

from django.conf import settings
from prometheus_client import Counter

from .purchase import strategy_remembered

PURCHASES = Counter(
    "flashsale_purchases",
    "Purchases answered, by the strategy of the product's sale and the answer's code: "
    "created, replayed, or the error's (sold_out, busy, throttled, invalid, ...)",
    ["strategy", "code"],
)
UNRESOLVED = "unresolved"

logger = logging.getLogger(__name__)


def purchase_counted(*, sku: object, body: object, status: int) -> None:
    """Count one purchase's answer. ``body`` is the answer's (the order, or the error's
    JSON).

    One counter, one write: every value prometheus-client keeps for gunicorn's
    workers is written under one lock per process, and a thread that loses the GIL
    while it holds it stalls the others. A latency histogram here (two writes more)
    cost the purchases' tail latency (docs/reference/metrics.md); the latency waits
    for a way that writes nothing on the purchase's path."""
    if not settings.FLASHSALE_METRICS:
        return
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
    try:
        PURCHASES.labels(strategy, code).inc()
    except OSError:
        # Counted after the purchase: its answer (an order committed) must not turn
        # into a 500 because a metrics file could not be written.
        logger.warning("the purchase's answer was not counted for /metrics", exc_info=True)
