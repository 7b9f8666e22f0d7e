"""Verdicts on sales with a payment window, on the stack: half the buyers pay (some as
their order falls due, racing the expirer), the unpaid units come back and a second
wave buys them, under the window cells' faults. Every try, every payment and the
final read with each order's status, the provider's ledger and the gate's count go
to the checker, which judges linearizability and conservation; the chaos runner's
checks include that the gate's Redis and MariaDB agree on every unit."""

from collections import Counter

import pytest

from common.history import Final, Pay, Purchase, read
from verdicts.checker import check
from verdicts.matrix import EXPIRY_PAUSE_MS, run_cell

pytestmark = [pytest.mark.e2e, pytest.mark.exclusive]  # the stack's one expirer, killed

SMALL = dict(stock=20, buyers=120, threads=12, trigger=5)


# The expirer killed mid-batch under three kinds of seller; the crossings of the
# whole life: the gate's Redis restarted with every order pending, MariaDB restarted
# and an app killed as orders fall due, and a webhook storm with payers paying twice.
CELLS = [("atomic", "kill-expirer"), ("setnx", "kill-expirer"), ("gate", "kill-expirer"),
         ("gate", "restart-redis-pending"), ("setnx", "restart-mariadb-due"), ("atomic", "kill-app-paying"),
         ("gate", "webhook-storm")]


@pytest.mark.parametrize(("strategy", "nemesis"), CELLS)
def test_a_sale_with_a_payment_window_under_the_fault_is_linearizable_and_conserves_its_units(
        strategy, nemesis, stack_config, stack_apps, tmp_path):
    stack_apps(expiry_pause_ms=EXPIRY_PAUSE_MS)  # the sale is the strategy's by its reset
    config = stack_config.replace(expiry_pause_ms=EXPIRY_PAUSE_MS)
    cell = run_cell(config, strategy=strategy, nemesis=nemesis, out=tmp_path, **SMALL)
    assert cell.end_state.injected, cell.end_state.notes
    assert cell.verdict.valid is True, cell.verdict.anomalies[:1]
    events = read(cell.history)
    final = events[-1]
    assert isinstance(final, Final)
    statuses = Counter(status for _, _, status in final.orders)
    # The window did its work: units came back and sold again, and payments landed.
    assert statuses["expired"] >= 1 and statuses["paid"] >= 1, statuses
    assert len(final.orders) > SMALL["stock"] and "pending" not in statuses
    paid = [e for e in events if isinstance(e, Pay)]
    assert paid and sum(e.result == "paid" for e in paid) <= statuses["paid"]
    # Every unit is left or held by one paid order: none sold twice, none lost.
    assert statuses["paid"] + final.remaining == SMALL["stock"]
    # The chaos runner's own checks hold too: the audit, the ledger, every replay,
    # every final answer true of the database, and no unit stranded.
    assert cell.end_state.broken == [], cell.end_state.notes
    # The final read carries what conservation needs: the provider's ledger (every
    # paid order's money kept, every other's given back) and the gate's own count.
    assert final.money is not None and final.unit_price, final
    assert (final.gate_remaining is not None) == (strategy == "gate")
    # The history file says the same to anyone who checks it again.
    assert check(read(cell.history)).valid is True
    assert all(p.complete >= p.invoke for p in events if isinstance(p, Purchase))
