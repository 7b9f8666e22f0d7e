"""``manage.py gate_redrive``: dead-lettered orders written again once the cause is
fixed, on the real MariaDB and the gate's Redis. The cause here is a constraint the
test adds to the orders table (as a migration gone wrong might), then lifts."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings

from orders.gate.store import gate_keys, gate_redis
from orders.models import Order
from orders.reset import sale_reset
from orders.selectors import order_status_get, sale_audit

from .test_gate import buy, persist

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def refusing_blocked_buyers():
    """A CHECK constraint that refuses the orders of buyer "blocked"; ``lift()`` drops it
    (and so does the end of the test, whatever happened)."""
    def lift():
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE orders_order DROP CONSTRAINT IF EXISTS test_refuses_blocked")

    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE orders_order"
                       " ADD CONSTRAINT test_refuses_blocked CHECK (user_id <> 'blocked')")
    yield lift
    lift()


def redrive(capsys) -> str:
    call_command("gate_redrive", "sku-1")
    return capsys.readouterr().out


@override_settings(FLASHSALE_STRATEGY="gate")
def test_a_dead_letter_is_written_once_its_cause_is_lifted_and_only_once(refusing_blocked_buyers, capsys):
    sale_reset(sku="sku-1", stock=5)
    refused = buy("k1", user="blocked", quantity=2)
    fine = buy("k2", user="u2")
    persist()
    assert list(Order.objects.values_list("pk", flat=True)) == [fine.order_id]
    assert order_status_get(order_id=refused.order_id).status == "dead_lettered"
    audit = sale_audit(sku="sku-1")
    assert (audit.gate.dead_lettered, audit.consistent) == (1, False)

    with pytest.raises(CommandError, match="1 dead-lettered orders of sku-1 are still refused"):
        call_command("gate_redrive", "sku-1")
    assert "0 written" in capsys.readouterr().out and Order.objects.count() == 1

    refusing_blocked_buyers()
    assert "sku-1: 1 written, 0 already written, 0 of a sale since reset, 0 still refused" in redrive(capsys)
    order = Order.objects.get(pk=refused.order_id)
    assert (order.user_id, order.quantity, order.idempotency_key) == ("blocked", 2, "k1")
    assert order_status_get(order_id=refused.order_id).status == "confirmed"
    audit = sale_audit(sku="sku-1")
    assert (audit.orders, audit.remaining, audit.gate.dead_lettered) == (2, 2, 0)
    assert audit.consistent and audit.gate.reconciled
    assert buy("k1", user="blocked", quantity=2).replayed  # its key answers with its order

    assert "0 written, 0 already written" in redrive(capsys)  # nothing left: nothing done
    assert Order.objects.count() == 2


@override_settings(FLASHSALE_STRATEGY="gate")
def test_a_dead_letter_whose_order_is_already_written_is_not_written_twice(capsys):
    sale_reset(sku="sku-1", stock=5)
    accepted = buy("k1")
    persist()
    [(entry_id, fields)] = gate_redis().xrange(gate_keys("sku-1").stream)
    # The same intent dead-lettered as well (a redelivery refused, say): a redrive
    # finds its order written and only clears the letter.
    gate_redis().xadd(gate_keys("sku-1").dead, {
        "entry": entry_id, "order": accepted.order_id, "reason": "test", "entry_id": entry_id,
        "order_id": accepted.order_id, "key": "k1", "user_id": fields["user"], "quantity": fields["quantity"],
        "before": fields["before"], "after": fields["after"], "instance": fields["instance"]})
    assert "0 written, 1 already written" in redrive(capsys)
    assert Order.objects.count() == 1 and gate_redis().xlen(gate_keys("sku-1").dead) == 0
    assert sale_audit(sku="sku-1").consistent
