"""A lock holder paused past its lease writes after the next holder (S17), and
the fencing token that refuses its write.

Runs real purchases (``order_create``) in threads against the database and Redis;
the runner sets Django up first, so the Django imports happen inside the function.
"""

from __future__ import annotations

import threading
import time
import uuid

from .base import Half, Outcome, Scenario
from .context import Context

LEASE_MS = 300


def s17_fencing_token(ctx: Context) -> Outcome:
    from django.conf import settings
    from django.test import override_settings

    from common.errors import ApplicationError
    from common.testing import start_thread
    from inventory.faults import stalled
    from orders.purchase import order_create
    from orders.reset import sale_reset
    from orders.selectors import sale_audit

    locking = {**settings.LOCKING, "setnx": {
        "BACKEND": "locking.backends.redis.setnx.SetnxLockBackend",
        "OPTIONS": {"url": ctx.redis_url, "key_prefix": f"{ctx.prefix}fixed:", "ttl_ms": LEASE_MS,
                    "retry_interval": 0.01, "wait_timeout": 5},
    }}

    def answer(box) -> str:
        error = box.get("error")
        return "201" if error is None else f"{error.status_code} {error.code}"

    def sale(*, fencing: bool, stall_at: str) -> dict:
        """One unit; A takes the lock and stalls at ``stall_at`` past its lease, until
        B is done or, when B cannot finish while A stalls (it waits for a row A
        locked), for 2 s: when A resumes then does not change the outcome."""
        sku = f"s17-{uuid.uuid4().hex[:8]}"
        sale_reset(sku=sku, stock=1)
        a_paused, b_done = threading.Event(), threading.Event()

        def pause(point):
            if point == stall_at:
                a_paused.set()
                time.sleep(LEASE_MS / 1000 + 0.05)  # past the lease, whatever happens next
                b_done.wait(2)

        def buyer_a():
            with stalled(pause):
                return order_create(sku=sku, quantity=1, user_id="a-stalled")

        with override_settings(FLASHSALE_STRATEGY="setnx", FLASHSALE_FENCING=fencing,
                               FLASHSALE_SECTION_DELAY_MS=0, LOCKING=locking):
            a, a_box = start_thread(buyer_a)
            if not a_paused.wait(10):
                a.join()
                raise a_box.get("error") or RuntimeError("A never reached the stall")
            b, b_box = start_thread(lambda: order_create(sku=sku, quantity=1, user_id="b"))
            b.join(15)
            b_done.set()
            a.join()
            b.join()
        for box in (a_box, b_box):
            if "error" in box and not isinstance(box["error"], ApplicationError):
                raise box["error"]
        audit = sale_audit(sku=sku)
        return {"answers": f"A {answer(a_box)}, B {answer(b_box)}", "orders": audit.orders,
                "oversold": audit.oversold, "consistent": audit.consistent}

    def half(fencing: bool) -> dict:
        read = sale(fencing=fencing, stall_at="read")
        start = sale(fencing=fencing, stall_at="start")
        return {"A stalls after its read: answers": read["answers"],
                "A stalls after its read: orders for 1 unit": read["orders"],
                "A stalls after its read: oversold": read["oversold"],
                "A stalls before touching the stock: answers": start["answers"],
                "A stalls before touching the stock: orders": start["orders"],
                "ledger matches orders, both sales": read["consistent"] and start["consistent"]}

    figures = half(fencing=False)
    broken = Half(f"setnx, {LEASE_MS} ms lease, no fence", figures,
                  failed=figures["A stalls after its read: oversold"] > 0)
    figures = half(fencing=True)
    fixed = Half("the same lock, its token stamped on the stock row", figures,
                 failed=figures["A stalls after its read: oversold"] != 0
                 or figures["A stalls after its read: orders for 1 unit"] != 1
                 or figures["A stalls before touching the stock: orders"] != 1
                 or "A 503 stale_lock" not in figures["A stalls before touching the stock: answers"]
                 or not figures["ledger matches orders, both sales"])
    return Outcome(broken, fixed)


SCENARIOS = [
    Scenario("S17", "a holder paused past its lease writes after the next holder",
             "003 (Kleppmann: fencing)",
             "No lease can tell a paused holder that it expired. A takes the lock and stalls "
             f"(a GC pause) past its {LEASE_MS} ms lease; B takes the lock and buys the one unit. "
             "If A had read the stock before stalling, it then writes what it computed: two "
             "orders. With fencing every acquisition gets a larger token and the purchase stamps "
             "the stock row with it before reading: B waits for the row A stamped and then reads "
             "A's sale; and a holder whose token is older than the row's (A stalled before "
             "touching the stock) is refused, 503, with nothing written.",
             s17_fencing_token, needs=("redis", "mysql")),
]
