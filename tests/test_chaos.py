"""A small sale under each fault, as ``make chaos`` runs them (larger, for every
strategy): the fault is real (a signal to the server's process group, then a
restart), and the verdict is read from the database."""

from types import SimpleNamespace

import pytest

import chaos.sale
from chaos.__main__ import table
from chaos.faults import FAULTS
from chaos.sale import _stall, sale_under_fault

# Each fault once, under a strategy it bites: the lock's server is the one that fails,
# or a holder dies or freezes with the lock.
CASES = [("kill-app", "redisson"), ("lose-redis", "setnx"), ("restart-mariadb", "mysql"),
         ("pause-app", "atomic"), ("zk-leader", "zookeeper"),
         # The fair lock: the killed instance's waiters stay in its line until they
         # have not asked for their timeout; the sale must go on after them.
         ("kill-app", "redisson-fair"),
         # The gate: its Redis crashes (the AOF keeps the sale), the database goes away
         # (the gate sells on, the backlog drains after), a persister dies mid-sale.
         ("restart-redis", "gate"), ("restart-mariadb", "gate"), ("kill-persister", "gate")]
# Faults of one app instance or persister: the rest strike a server the other worker's
# tests use too (conftest.py), so they run alone.
APART = {"kill-app", "pause-app", "kill-persister"}
PARAMS = [pytest.param(f, s, id=f"{f}-{s}", marks=() if f in APART else pytest.mark.exclusive)
          for f, s in CASES]


@pytest.mark.parametrize(("fault", "strategy"), PARAMS)
def test_a_sale_under_the_fault_keeps_every_invariant_and_every_answer_true(
        fault, strategy, stack_config, stack_apps, reconnect_afterwards):
    stack_apps()  # as started: the sale's product is reset to its strategy, as make chaos does
    verdict = sale_under_fault(stack_config, strategy=strategy,
                               fault=FAULTS[fault], stock=30, buyers=240, threads=12, trigger=10)
    assert verdict.injected and verdict.orders == 30, table([verdict])
    assert verdict.broken == [], table([verdict]) + "\n" + "; ".join(verdict.notes)


def test_the_stall_is_the_longest_stretch_without_an_order_while_stock_remained():
    assert _stall([1.0, 1.5, 4.0], sold_out=True, started=0.5, ended=9.0) == 2.5
    assert _stall([1.0, 1.5, 4.0], sold_out=False, started=0.5, ended=9.0) == 5.0  # then nothing sold
    assert _stall([], sold_out=False, started=0.0, ended=3.0) == 3.0


class _Answers:
    """A client whose purchases are answered, in turn, ``answers`` (status, error)."""

    def __init__(self, answers):
        self.answers = list(answers)

    def order(self, sku, quantity, user, *, key):
        status, error = self.answers.pop(0)
        body = {"error": error} if error else {"order_id": 7}
        return SimpleNamespace(status_code=status, headers={"Content-Type": "application/json"},
                               json=lambda: body)


def test_a_buyer_told_the_outcome_is_unknown_asks_again_past_its_tries_until_it_knows(monkeypatch):
    monkeypatch.setattr(chaos.sale, "BACKOFF", (0.001, 0.001))
    unknown, unavailable = (503, "outcome_unknown"), (503, "unavailable")
    told = _Answers([unavailable] * 4 + [unknown] * 3 + [(200, None)])
    answer = chaos.sale._buy(lambda: told, "sku", "key", "buyer", None)
    assert (answer.status, answer.order_id, answer.tries) == (200, 7, 8)
    # Any other 503 ends at the 5th try, as before.
    told = _Answers([unavailable] * 6)
    assert chaos.sale._buy(lambda: told, "sku", "key", "buyer", None).tries == chaos.sale.TRIES


def test_a_buyer_told_the_outcome_is_unknown_is_not_told_it_by_a_try_that_wrote_nothing(monkeypatch):
    """Its first try's script ran and its reply was lost as the gate's Redis went
    down; the tries while it is down write nothing (``unavailable``), which says
    nothing of the first: the buyer asks on until an answer says what became of it."""
    monkeypatch.setattr(chaos.sale, "BACKOFF", (0.001, 0.001))
    unknown, unavailable, busy = (503, "outcome_unknown"), (503, "unavailable"), (503, "busy")
    told = _Answers([unknown] + [unavailable] * 5 + [busy] + [(200, None)])
    answer = chaos.sale._buy(lambda: told, "sku", "key", "buyer", None)
    assert (answer.status, answer.order_id, answer.tries) == (200, 7, 8)


def test_a_buyer_whose_purchase_no_instance_answered_asks_again_past_its_tries(monkeypatch):
    """nginx's 502 and 504 say the purchase may or may not have gone through, and so
    does no answer: the buyer asks again with its key until it knows."""
    monkeypatch.setattr(chaos.sale, "BACKOFF", (0.001, 0.001))
    told = _Answers([(502, "unavailable")] * 4 + [(504, "timeout")] * 2 + [(409, "sold_out")])
    answer = chaos.sale._buy(lambda: told, "sku", "key", "buyer", None)
    assert (answer.status, answer.error, answer.tries) == (409, "sold_out", 7)


def test_a_buyer_stops_asking_once_its_patience_is_spent(monkeypatch):
    monkeypatch.setattr(chaos.sale, "BACKOFF", (0.001, 0.001))
    monkeypatch.setattr(chaos.sale, "UNKNOWN_PATIENCE", 0.0)
    told = _Answers([(503, "outcome_unknown")] * 6)
    answer = chaos.sale._buy(lambda: told, "sku", "key", "buyer", None)
    assert (answer.status, answer.error, answer.tries) == (503, "outcome_unknown", chaos.sale.TRIES)
