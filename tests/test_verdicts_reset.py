"""The reset-under-load verdict cell on the stack: the operator resets a sale to new
terms (on sale in an hour, a waiting room, a payment window) while buyers buy it. The
history is two sales; the new one must hold no order and answer none."""

import pytest

from common.history import Final, Reset, read
from verdicts.checker import check
from verdicts.matrix import run_cell

pytestmark = pytest.mark.e2e

SMALL = dict(stock=20, buyers=120, threads=12, trigger=5)


@pytest.mark.parametrize("strategy", ["atomic", "gate"])
def test_a_reset_under_load_leaves_the_new_sale_no_order(strategy, stack_config, stack_apps, tmp_path):
    client = stack_apps()  # the sale is the strategy's by its reset
    cell = run_cell(stack_config, strategy=strategy, nemesis="reset-under-load", out=tmp_path, **SMALL)
    assert cell.end_state.injected, cell.end_state.notes
    assert cell.verdict.valid is True, cell.verdict.anomalies[:2]
    events = read(cell.history)
    resets = [e for e in events if isinstance(e, Reset)]
    assert len(resets) == 2 and resets[1].opens_at is not None
    assert client.product(resets[1].sku)["strategy"] == strategy  # new terms, the same strategy
    final = next(e for e in events if isinstance(e, Final))
    assert (final.orders, final.remaining) == ([], SMALL["stock"])
    old_sale, new_sale = check(events).skus
    assert old_sale.ok >= SMALL["trigger"]  # the old sale sold before the reset struck
    assert new_sale.ok == 0 and new_sale.operations > 0  # buyers kept coming, and none was sold to
