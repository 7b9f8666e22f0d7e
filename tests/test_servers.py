"""The other request server (``FLASHSALE_SERVER=granian``, flashsale.serve) through
nginx on the running stack: the invariants of each seller and each lock family (the
rest of the suite runs them under the default server), the weak strategy caught, the
chaos runner's faults on the instances (killed, frozen), a killed worker replaced with
its counts kept (tests/test_metrics.py), and under each server the purchase deadline
counted from when nginx received the request."""

import threading
import time

import pytest

from chaos.__main__ import table
from chaos.faults import FAULTS
from chaos.sale import sale_under_fault
from flashsale.serve import DEFAULT_SERVER, SERVERS
from stack.supervisor import Supervisor

from .test_e2e_oversell import RACE, STOCK, sale

pytestmark = pytest.mark.e2e

OTHER = next(server for server in SERVERS if server != DEFAULT_SERVER)
# One of each lock family (none, Redis, ZooKeeper, MySQL), the conditional update, and the gate.
FAMILIES = ["setnx", "redisson", "zookeeper", "mysql-for-update", "atomic", "gate"]


# Each product under its own strategy, on one deployment (as tests/test_e2e_oversell.py).
@pytest.mark.parametrize("strategy", FAMILIES)
def test_each_seller_and_lock_family_sells_exactly_the_stock(stack_apps, strategy):
    client = stack_apps(instances=2, server=OTHER, **RACE)
    audit = sale(client, f"e2e-{OTHER}-{strategy}", strategy=strategy)
    assert (audit["oversold"], audit["lost_updates"], audit["consistent"]) == (0, 0, True), audit
    assert audit["remaining"] == 0 and audit["orders"] == STOCK


def test_the_weak_strategy_still_oversells(stack_apps):
    audit = sale(stack_apps(instances=2, server=OTHER, **RACE), f"e2e-{OTHER}-none", strategy="none")
    assert audit["oversold"] > 0 or audit["lost_updates"] > 0, audit


# The instance's own faults: killed with the lock held (restarted by the stack), frozen.
CHAOS = [("kill-app", "redisson"), ("pause-app", "atomic")]


@pytest.mark.parametrize(("fault", "strategy"), CHAOS, ids=[f"{f}-{s}" for f, s in CHAOS])
def test_a_sale_under_an_instance_fault_keeps_every_invariant(fault, strategy, stack_config, stack_apps,
                                                              reconnect_afterwards):
    stack_apps(server=OTHER)  # the sale is the strategy's by its reset (chaos.sale)
    verdict = sale_under_fault(stack_config.replace(server=OTHER), strategy=strategy,
                               fault=FAULTS[fault], stock=30, buyers=240, threads=12, trigger=10)
    assert verdict.injected and verdict.orders == 30, table([verdict])
    assert verdict.broken == [], table([verdict]) + "\n" + "; ".join(verdict.notes)


@pytest.mark.parametrize("server", SERVERS)
def test_a_purchase_that_waited_past_its_deadline_is_refused(stack_apps, stack_config, server):
    """The instance frozen (SIGSTOP) with a purchase queued at it, past the 8 s
    deadline and inside nginx's 10 s: thawed, it refuses the purchase, since the
    deadline counts from nginx's X-Request-Start, not from when the server read it."""
    client = stack_apps(strategy="atomic", instances=1, server=server)
    sku = f"e2e-{server}-deadline"
    client.reset(sku, stock=5)
    client.as_buyer("u1")  # signed up before the instance freezes
    answers = []
    with Supervisor(stack_config).paused(["app1"]):
        buyer = threading.Thread(target=lambda: answers.append(client.order(sku, 1, "u1", key=f"{sku}-k1")))
        buyer.start()
        time.sleep(8.6)
    buyer.join(10)
    (answer,) = answers
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"] == "busy" and "deadline" in answer.json()["message"]
    assert client.audit(sku)["orders"] == 0
