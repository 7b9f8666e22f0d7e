"""Scenarios in the database: the lock released before the commit (S16) and
multi-item purchases taking their locks in opposite orders (S12).

They use the Django models, so the runner sets Django up first; the imports of
models happen inside the functions for that reason.
"""

from __future__ import annotations

import threading
import time
import uuid

from locking.backends.mysql import InsertLockBackend
from locking.teaching.mysql_unsorted import UnsortedInsertLockBackend

from .base import Half, Outcome, Scenario
from .context import Context

BUYERS, STOCK = 20, 10


def s16_release_before_commit(ctx: Context) -> Outcome:
    from django.db import transaction

    from common.errors import SoldOut
    from common.strategies import Deduction
    from common.testing import run_at_once
    from inventory.models import Stock, StockFlow
    from inventory.services import Operation, product_reset, stock_deduct

    def sale(release_early: bool) -> dict:
        sku = f"s16-{uuid.uuid4().hex[:8]}"
        product = product_reset(sku=sku, stock=STOCK)
        backend = ctx.redisson()  # a correct lock: the order is what is wrong

        def buy(i: int) -> None:
            lock = backend.lock(f"stock:{sku}")
            assert lock.acquire(timeout=30)
            released = False
            try:
                with transaction.atomic():
                    try:
                        stock_deduct(product=product, quantity=1, operation=Operation(f"{sku}-{i}", str(i)),
                                     deduction=Deduction.READ_MODIFY_WRITE)
                    except SoldOut:
                        return
                    finally:
                        if release_early:  # article 002: unlock in a finally inside @Transactional
                            lock.release()
                            released = True
                    time.sleep(0.05)  # the rest of the method, then the framework's commit
            finally:
                if not released:
                    lock.release()

        errors = [e for e in run_at_once(buy, BUYERS) if e is not None]
        if errors:
            raise errors[0]
        sold = StockFlow.objects.filter(product=product).count()
        left = Stock.objects.get(product=product).quantity
        return {"buyers": BUYERS, "stock": STOCK, "deductions recorded": sold, "stock left": left,
                "lost updates": sold - (STOCK - left), "oversold": max(0, sold - STOCK)}

    figures = sale(release_early=True)
    broken = Half("redisson, released before commit", figures,
                  failed=figures["lost updates"] > 0 or figures["oversold"] > 0)
    figures = sale(release_early=False)
    fixed = Half("redisson, released after commit", figures,
                 failed=figures["lost updates"] != 0 or figures["oversold"] != 0)
    return Outcome(broken, fixed)


def _innodb_deadlocks() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")
        return int(cursor.fetchone()[1])


def s12_multi_key_order(ctx: Context) -> Outcome:
    from common.testing import run_at_once

    def two_purchases(backend, **hooks) -> dict:
        items = [f"stock:s12-a-{uuid.uuid4().hex[:6]}", f"stock:s12-b-{uuid.uuid4().hex[:6]}"]
        orders = [items, list(reversed(items))]  # the same two items, listed in opposite orders

        def buy(i: int) -> None:
            lock = backend.lock_many(orders[i], **hooks)
            assert lock.acquire(), "lock wait timeout"
            time.sleep(0.05)
            lock.release()

        before, started = _innodb_deadlocks(), time.monotonic()
        errors = [e for e in run_at_once(buy, 2) if e is not None]
        return {"InnoDB deadlocks": _innodb_deadlocks() - before, "both purchases done": not errors,
                "seconds": round(time.monotonic() - started, 2)}

    # Each takes its first item, then both wait here, then each asks for the other's.
    first_taken = threading.Barrier(2, timeout=5)
    waited = threading.local()

    def once_each():
        if not getattr(waited, "done", False):  # the deadlock victim's retry goes straight on
            waited.done = True
            first_taken.wait()

    figures = two_purchases(UnsortedInsertLockBackend("s12", {"wait_timeout": 10}), between_names=once_each)
    broken = Half("names in the order listed", figures, failed=figures["InnoDB deadlocks"] > 0)
    figures = two_purchases(InsertLockBackend("s12", {"wait_timeout": 10}))
    fixed = Half("names de-duplicated and sorted", figures,
                 failed=figures["InnoDB deadlocks"] != 0 or not figures["both purchases done"])
    return Outcome(broken, fixed)


SCENARIOS = [
    Scenario("S12", "multi-key lock without de-duplication and ordering", "000",
             "Two multi-item purchases of the same items, listed in opposite orders, each lock "
             "their first item and wait for the other's: a deadlock, which InnoDB breaks by "
             "rolling one back. The article sorts the keys. You will see InnoDB's deadlock count.",
             s12_multi_key_order, needs=("mysql",)),
    Scenario("S16", "lock released before the transaction commits", "002 (unlock inside @Transactional)",
             "With a correct lock, releasing it in a finally inside the transaction lets the next "
             "holder read the stock before this write is committed. 20 buyers, 10 units, a 50 ms "
             "gap before each commit.", s16_release_before_commit, needs=("redis", "mysql")),
]


def s15_optimistic_under_contention(ctx: Context) -> Outcome:
    from django.test import override_settings

    from common.errors import Busy
    from common.testing import run_at_once
    from orders.purchase import order_create
    from orders.reset import sale_reset
    from orders.selectors import sale_audit

    buyers, stock = 16, 10

    def sale(strategy: str) -> dict:
        sku = f"s15-{uuid.uuid4().hex[:8]}"
        sale_reset(sku=sku, stock=stock)
        # 20 ms of work between the read and the write: every concurrent buyer reads
        # the same version; each round, one write wins.
        with override_settings(FLASHSALE_STRATEGY=strategy, FLASHSALE_SECTION_DELAY_MS=20,
                               FLASHSALE_OPTIMISTIC_RETRIES=3):
            outcomes = run_at_once(lambda i: order_create(sku=sku, quantity=1, user_id=f"u{i}"), buyers)
        audit = sale_audit(sku=sku)
        return {"buyers": buyers, "stock": stock, "orders": audit.orders, "retries": audit.retries,
                "gave up (503 busy)": sum(isinstance(o, Busy) for o in outcomes),
                "oversold": audit.oversold}

    figures = sale("optimistic")
    broken = Half("optimistic, 3 retries", figures,
                  failed=figures["retries"] >= buyers // 2 or figures["gave up (503 busy)"] > 0)
    figures = sale("mysql-for-update")
    fixed = Half("a lock (mysql-for-update)", figures,
                 failed=figures["retries"] > 0 or figures["orders"] != stock)
    return Outcome(broken, fixed)


SCENARIOS.append(
    Scenario("S15", "optimistic version under heavy contention", "000, 004",
             "A version check needs no lock and never oversells, but when everyone writes the "
             "same row at once most writes find the version moved and retry, and some give up "
             "while stock remains. 16 buyers, 10 units, at most 3 retries each.",
             s15_optimistic_under_contention, needs=("mysql",)))
