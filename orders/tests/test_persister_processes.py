"""Persisters as real processes (``manage.py persist_orders``) on the suite's Redis and
test database: one SIGKILLed in the middle of a batch, its sibling carries on.

The batch is caught in the middle deterministically: the test holds the sale's row
lock, so the first persister reads its batch, opens its transaction and waits inside
it, which the test sees in the process list before it sends SIGKILL.
"""

import os
import signal
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings

from common.testing import idle_transaction_allowed
from orders.gate.store import GROUP, gate_keys, gate_redis
from orders.models import GateSale, Order
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.selectors import sale_audit
from stack.config import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


def start_persister(name: str, *, claim_idle_ms: int) -> subprocess.Popen:
    db = connection.settings_dict
    url = f"mysql://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "flashsale.settings.test", "DATABASE_URL": url,
           "FLASHSALE_STRATEGY": "gate", "FLASHSALE_INSTANCE": name, "LOG_LEVEL": "INFO"}
    return subprocess.Popen([sys.executable, "manage.py", "persist_orders", f"--name={name}",
                             f"--claim-idle-ms={claim_idle_ms}"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def until(condition, seconds: float = 20, what: str = "the condition"):
    deadline = time.monotonic() + seconds
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {seconds} s")
        time.sleep(0.05)
    return value


def waiting_for_the_sale_row() -> int:
    """Connections of the app's user (visible without the PROCESS privilege) to this
    test database inside a statement that locks gate sale rows: the batch's
    transaction, blocked on ours. (The lane's other pytest, with a test database of
    its own on the same server and user, runs such statements too.)"""
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() "
                       "AND DB = DATABASE() AND INFO LIKE '%%orders_gatesale%%FOR UPDATE%%'")
        return cursor.fetchone()[0]


def stop(process: subprocess.Popen) -> str:
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=10)
    return out


@override_settings(FLASHSALE_STRATEGY="gate")
def test_a_persister_killed_inside_its_batch_transaction_leaves_the_batch_to_its_sibling():
    sale_reset(sku="sku-1", stock=50)
    accepted = [order_create(sku="sku-1", quantity=1, user_id=f"u{i}", idempotency_key=f"k{i}").order_id
                for i in range(30)]
    stream = gate_keys("sku-1").stream
    first = start_persister("first", claim_idle_ms=60_000)
    try:
        # The hold idles while the persister starts, which a busy machine stretches.
        with idle_transaction_allowed(), transaction.atomic():
            GateSale.objects.select_for_update().get()  # the batch will wait for this row
            until(lambda: gate_redis().xpending(stream, GROUP)["pending"] == 30, what="the batch read")
            until(waiting_for_the_sale_row, what="the batch waiting inside its transaction")
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        assert not Order.objects.exists()  # the killed transaction left nothing
        second = start_persister("second", claim_idle_ms=300)  # claims what "first" left pending
        try:
            until(lambda: sale_audit(sku="sku-1").gate.backlog == 0, what="the backlog written")
        finally:
            log = stop(second)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert "claimed 30 entries of sku-1 left by another" in log, log
    assert sorted(Order.objects.values_list("pk", flat=True)) == sorted(accepted)  # each once
    audit = sale_audit(sku="sku-1")
    assert (audit.orders, audit.remaining, audit.consistent, audit.gate.reconciled) == (30, 20, True, True)
    assert gate_redis().xpending(stream, GROUP)["pending"] == 0


@override_settings(FLASHSALE_STRATEGY="gate")
def test_a_persister_started_while_the_sale_runs_writes_what_was_accepted_before_it():
    sale_reset(sku="sku-1", stock=10)
    for i in range(4):
        order_create(sku="sku-1", quantity=1, user_id=f"u{i}", idempotency_key=f"k{i}")
    persister = start_persister("late", claim_idle_ms=60_000)
    try:
        until(lambda: Order.objects.count() == 4, what="the first orders written")
        order_create(sku="sku-1", quantity=2, user_id="u9", idempotency_key="k9")
        until(lambda: sale_audit(sku="sku-1").consistent, what="the audit consistent")
    finally:
        stop(persister)
    assert not settings.FLASHSALE_GATE_REDIS_URL.endswith("/0")  # the suite's Redis, never the stack's
    assert sale_audit(sku="sku-1").ordered_quantity == 6
