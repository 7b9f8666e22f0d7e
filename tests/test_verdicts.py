"""Verdicts from recorded histories on the real stack: a small run of the matrix
(``make verdicts`` runs it all). ``none`` must be caught by the checker with no
fault at all, with the window where no order gets past; a correct strategy whose
instance is killed mid-sale (answers lost, tries unknown) must be linearizable."""

import pytest

from verdicts.checker import check
from verdicts.history import UNKNOWN, Purchase, read
from verdicts.matrix import run_cell
from verdicts.timeline import svg

pytestmark = pytest.mark.e2e

SMALL = dict(stock=30, buyers=240, threads=12, trigger=10)


def test_none_is_not_linearizable_without_any_fault(stack_config, stack_apps, tmp_path):
    stack_apps(strategy="none", section_delay_ms=2.0)
    cell = run_cell(stack_config.replace(strategy="none", section_delay_ms=2.0), strategy="none",
                    nemesis="calm", out=tmp_path, **SMALL)
    (sku,) = cell.verdict.skus
    assert sku.linearizable is False, cell.verdict
    window = sku.window
    assert window.stuck in window.ops and len(window.ops) >= 2  # an answer, and what it overlaps
    assert "<svg" in svg(window) and window.stuck.describe() in "".join(op.describe() for op in window.ops)
    # The history file says the same to anyone who checks it again.
    assert check(read(cell.history)).valid is False


def test_a_correct_strategy_with_an_instance_killed_is_linearizable(stack_config, stack_apps, tmp_path,
                                                                     reconnect_afterwards):
    stack_apps(strategy="atomic")
    cell = run_cell(stack_config.replace(strategy="atomic"), strategy="atomic", nemesis="kill-app",
                    out=tmp_path, **SMALL)
    assert cell.end_state.injected and cell.end_state.orders == SMALL["stock"]
    assert cell.verdict.valid is True, cell.verdict.anomalies
    events = read(cell.history)
    # Every try is in the history, each buyer's in order, and the final read closes it.
    purchases = [e for e in events if isinstance(e, Purchase)]
    assert len(purchases) >= SMALL["buyers"] and all(p.complete >= p.invoke for p in purchases)
    assert sum(p.outcome == UNKNOWN for p in purchases) == cell.unknown
    assert events[-1].type == "final" and events[-1].remaining == 0
