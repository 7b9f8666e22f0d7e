"""A gate sale whose Redis fails over (``orders.gate.reconcile``): a scratch primary
and its replica on loopback, started here and stopped by PID. The replica is cut off
first (REPLICAOF NO ONE, what Sentinel tells the replica it promotes), then the
primary accepts orders a persister writes to the database, then it stops: the
promoted copy has the stock as it was before those orders."""

import threading
from contextlib import contextmanager

import pytest
from django.core.management import call_command
from django.test import override_settings

from common.errors import Busy, SoldOut
from common.testing import wait_until
from orders import selectors
from orders.gate.persister import Persister
from orders.gate.reconcile import gate_failed_over, gate_reconcile
from orders.gate.sell import GateFailover
from orders.gate.store import gate_keys, gate_redis
from orders.models import GateSale, Order
from orders.purchase import order_create
from orders.reset import sale_reset
from stack.scratch import redis_servers, replica_in_step, start_redis

pytestmark = pytest.mark.django_db(transaction=True)

SKU = "failover-1"


def buy(key: str):
    return order_create(sku=SKU, quantity=1, user_id=f"buyer-{key}", idempotency_key=key)


def written(persister: Persister) -> None:
    """Until the persister has written everything the stream holds."""
    wait_until(lambda: persister.step() == 0 and not gate_redis().xpending(gate_keys(SKU).stream,
                                                                             "persisters")["pending"],
               10, what="the stream written")


@contextmanager
def promoted_behind():
    """A sale of 5 on a primary: k1 and k2 bought and in the replica; k3 and k4 bought
    with the replica held, and written to the database from the primary; then the
    primary gone and the replica promoted. Yields the promoted server, with the gate
    pointed at it."""
    with redis_servers(1) as (primary,):
        replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
        try:
            with override_settings(FLASHSALE_STRATEGY="gate", FLASHSALE_GATE_REDIS_URL=primary.url):
                sale_reset(sku=SKU, stock=5)
                persister = Persister("p1", block_ms=10, claim_idle_ms=100)
                for key in ("k1", "k2"):
                    buy(key)
                written(persister)
                wait_until(lambda: replica_in_step(primary.client()), 10, what="the replica in step")
                # The link cut: the replica takes nothing more (promoted now, where
                # Sentinel would promote it once the primary is gone: the same copy).
                replica.client().execute_command("REPLICAOF", "NO", "ONE")
                for key in ("k3", "k4"):
                    buy(key)
                written(persister)  # in the database: the replica never heard of them
                primary.stop()
            with override_settings(FLASHSALE_STRATEGY="gate", FLASHSALE_GATE_REDIS_URL=replica.url):
                assert replica.client().hget(gate_keys(SKU).sale, "stock") == b"3"  # behind by k3 and k4
                yield replica
        finally:
            replica.stop()


def test_a_promoted_copy_sells_nothing_until_reconciled_and_then_never_a_unit_twice():
    with promoted_behind():
        assert gate_failed_over([SKU]) == [SKU]
        with pytest.raises(GateFailover) as paused:
            buy("k5")  # the promoted copy would sell the unit k3 holds
        assert paused.value.status_code == 503 and paused.value.headers["Retry-After"] == "1"

        Persister("p2", block_ms=10).step()  # finds the sale failed over, and reconciles it
        assert gate_failed_over([SKU]) == []
        assert gate_redis().hget(gate_keys(SKU).sale, "stock") == "1"  # 5, less the 4 in the database
        assert buy("k3").replayed  # a key the promoted copy lost, answered from the database
        buy("k5")
        with pytest.raises(SoldOut):
            buy("k6")
        written(Persister("p2", block_ms=10))
        assert Order.objects.filter(product__sku=SKU).count() == 5  # the stock, never more
        assert gate_reconcile(sku=SKU) is None  # again: nothing to do


def test_the_superseded_sale_writes_nothing_more_from_any_server():
    with promoted_behind() as promoted:
        old = GateSale.objects.get(product__sku=SKU)
        done = gate_reconcile(sku=SKU)
        assert (done.replaced, done.redis_stock, done.stock) == (old.pk, 3, 1)
        # An entry of the old sale that reaches a persister late (from the old primary,
        # had it come back) is of a superseded sale: nothing is written.
        stream = gate_keys(SKU).stream
        promoted.client().xadd(stream, {"order": str((old.pk << 25) + 8), "key": "late", "user": "u",
                                        "quantity": "1", "before": "1", "after": "0", "instance": "x"})
        written(Persister("p2", block_ms=10))
        assert not Order.objects.filter(idempotency_key="late").exists()


def test_two_reconciliations_at_once_open_one_sale():
    with promoted_behind():
        before = GateSale.objects.count()
        results, barrier = [], threading.Barrier(2)

        def reconcile():
            barrier.wait()
            results.append(gate_reconcile(sku=SKU, within=5))

        threads = [threading.Thread(target=reconcile) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert GateSale.objects.count() == before + 1
        assert sum(r is not None for r in results) == 1  # the other found it done
        assert gate_redis().hget(gate_keys(SKU).sale, "block") == str(GateSale.objects.latest("pk").pk)
        assert gate_redis().hget(gate_keys(SKU).sale, "stock") == "1"


def test_a_stream_not_written_yet_or_with_dead_letters_waits_and_the_command_reconciles_after(capsys):
    with promoted_behind():
        gate_redis().xadd(gate_keys(SKU).stream, {"order": "not a number"})  # no persister read it yet
        with pytest.raises(Busy, match="not written"):
            gate_reconcile(sku=SKU)
        written(Persister("p2", block_ms=10))  # malformed: dead-lettered
        with pytest.raises(Busy, match="dead letters"):
            gate_reconcile(sku=SKU)
        gate_redis().delete(gate_keys(SKU).dead)  # what a redrive would leave
        call_command("gate_reconcile", SKU)
        assert "replaced by sale" in capsys.readouterr().out
        call_command("gate_reconcile")
        assert capsys.readouterr().out == ""  # none failed over any more
        assert gate_failed_over([SKU]) == []


def test_an_audit_that_a_reconciliation_overtakes_reads_one_sale_in_both_stores(monkeypatch):
    """A sale whose two orders wait in the stream alone when its Redis fails over (a
    restart from its append-only file looks the same: the sale on another server).
    The audit reads the database's snapshot first; a persister writes the two orders
    and reconciles the sale before the audit reads Redis. Paired, the new sale's
    counts and the snapshot's no orders would say an unwritten backlog reconciled."""
    with redis_servers(1) as (primary,):
        replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
        try:
            with override_settings(FLASHSALE_STRATEGY="gate", FLASHSALE_GATE_REDIS_URL=primary.url):
                sale_reset(sku=SKU, stock=5)
                buy("k1")
                buy("k2")
                wait_until(lambda: replica_in_step(primary.client()), 10, what="the replica in step")
                replica.client().execute_command("REPLICAOF", "NO", "ONE")
                primary.stop()
            with override_settings(FLASHSALE_STRATEGY="gate", FLASHSALE_GATE_REDIS_URL=replica.url):
                assert gate_failed_over([SKU]) == [SKU] and not Order.objects.exists()
                real, tallies = selectors.gate_tally, []

                def overtaken(*, sku):
                    if not tallies:  # the snapshot is taken: the reconciliation lands now
                        persister = Persister("p1", block_ms=10)
                        worker = threading.Thread(target=lambda: wait_until(
                            lambda: persister.step() == 0 and not gate_failed_over([SKU]), 10,
                            what="the sale written and reconciled"))
                        worker.start()
                        worker.join()
                    tallies.append(real(sku=sku))
                    return tallies[-1]

                monkeypatch.setattr(selectors, "gate_tally", overtaken)
                audit = selectors.sale_audit(sku=SKU)
        finally:
            replica.stop()
    assert (audit.orders, audit.consistent, audit.gate.reconciled, audit.gate.backlog) == (2, True, True, 0)
    assert len(tallies) == 2  # the first pairing refused, the audit begun again
    assert audit.gate.sale == GateSale.objects.latest("pk").pk


def test_a_reconciliation_another_overtakes_leaves_the_sale_it_opened_alone(monkeypatch):
    """Two reconcilers find the sale failed over; the second completes after the first
    has read the failed-over sale and before it goes on. The first must reconcile the
    sale it read (none left to do), never the new one: that sale sells on its server,
    and a reconciliation of it would sell again what it sold since the snapshot."""
    from orders.gate import reconcile

    with promoted_behind():
        before = GateSale.objects.count()
        real, overtaken = reconcile.sales_failed_over, []

        def then_overtaken(skus, *names):
            found = real(skus, *names)
            if not overtaken:  # the first reader: the other runs whole now
                overtaken.append(None)
                overtaken[0] = reconcile.gate_reconcile(sku=SKU, within=5)
            return found

        monkeypatch.setattr(reconcile, "sales_failed_over", then_overtaken)
        first = reconcile.gate_reconcile(sku=SKU, within=5)
        assert overtaken and overtaken[0] is not None  # the other opened the new sale
        assert first is None
        assert GateSale.objects.count() == before + 1
        assert gate_redis().hget(gate_keys(SKU).sale, "block") == str(overtaken[0].sale)
