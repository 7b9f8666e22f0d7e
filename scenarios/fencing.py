"""A lock holder paused past its lease writes after the next holder (S17), and
the fencing token that refuses its write.

Runs real purchases (``order_create``) in threads against the database and Redis;
the runner sets Django up first, so the Django imports happen inside the function.
"""

from __future__ import annotations

import threading
import uuid

from .base import Half, Outcome, Scenario
from .context import Context

LEASE_MS = 300


def s17_fencing_token(ctx: Context) -> Outcome:
    from django.conf import settings
    from django.test import override_settings

    from flashsale.errors import ApplicationError
    from flashsale.testing import start_thread
    from inventory.services import stalled
    from orders.selectors import sale_audit
    from orders.services import order_create, sale_reset

    locking = {**settings.LOCKING, "setnx": {
        "BACKEND": "locking.backends.redis.setnx.SetnxLockBackend",
        "OPTIONS": {"url": ctx.redis_url, "key_prefix": f"{ctx.prefix}fixed:", "ttl_ms": LEASE_MS,
                    "retry_interval": 0.01, "wait_timeout": 5},
    }}

    def sale(fencing: bool) -> dict:
        sku = f"s17-{uuid.uuid4().hex[:8]}"
        sale_reset(sku=sku, stock=1)
        a_paused, b_done = threading.Event(), threading.Event()

        def pause_a():
            # A has read the stock (1 left) and stops, holding the lock, until B
            # (which gets the lock once A's lease runs out) has bought and committed.
            a_paused.set()
            b_done.wait(10)

        def buyer_a():
            with stalled(pause_a):
                return order_create(sku=sku, quantity=1, user_id="a-paused")

        with override_settings(FLASHSALE_STRATEGY="setnx", FLASHSALE_FENCING=fencing,
                               FLASHSALE_RACE_DELAY_MS=0, LOCKING=locking):
            a, a_box = start_thread(buyer_a)
            if not a_paused.wait(10):
                a.join()
                raise a_box.get("error") or RuntimeError("A never reached its critical section")
            b, b_box = start_thread(lambda: order_create(sku=sku, quantity=1, user_id="b"))
            b.join()
            b_done.set()
            a.join()
        for box in (a_box, b_box):
            if "error" in box and not isinstance(box["error"], ApplicationError):
                raise box["error"]
        audit = sale_audit(sku=sku)

        def answer(box) -> str:
            error = box.get("error")
            return "201 created" if error is None else f"{error.status_code} {error.code}"

        return {"stock": 1, "B (the newer holder)": answer(b_box), "A (paused past its lease)": answer(a_box),
                "orders": audit.orders, "stock-flow rows": audit.flow_rows, "oversold": audit.oversold,
                "ledger matches orders": audit.consistent}

    figures = sale(fencing=False)
    broken = Half(f"setnx, {LEASE_MS} ms lease, no fence", figures, failed=figures["oversold"] > 0)
    figures = sale(fencing=True)
    fixed = Half("the same lock, its token checked by the stock write", figures,
                 failed=figures["oversold"] != 0 or figures["orders"] != 1
                 or not figures["ledger matches orders"]
                 or not figures["A (paused past its lease)"].startswith("503"))
    return Outcome(broken, fixed)


SCENARIOS = [
    Scenario("S17", "a holder paused past its lease writes after the next holder",
             "003 (Kleppmann: fencing)",
             "No lease can tell a paused holder that it expired: A reads the stock (1 left), "
             f"stalls (a GC pause) past its {LEASE_MS} ms lease, B takes the lock and buys the "
             "unit, then A wakes and writes what it computed. With fencing every acquisition "
             "gets a larger token, the stock row keeps the largest that wrote it, and A's older "
             "token is refused: A's purchase answers 503 and leaves nothing behind.",
             s17_fencing_token, needs=("redis", "mysql")),
]
