"""Concurrent purchases through nginx on real instances: oversell with the weak
strategies, none with the fix.

The race is widened on purpose: 20 ms between reading the stock and writing it,
32 buyers released at once. Without protection nearly every pair of overlapping
purchases loses an update, so "no lost update at all" would take hundreds of
sections never overlapping: if these ever flake, widen the delay, never loosen
the assertions.
"""

import concurrent.futures
import uuid

import pytest

from common.strategies import STRATEGIES
from loadtest.burst import burst

pytestmark = pytest.mark.e2e

RACE = dict(section_delay_ms=20.0)
# Two rounds of the 32 buyers: the first races for the 20 units, the second buys what
# a 503 (busy) left and is refused once they are sold. More attempts only add refusals.
STOCK, ATTEMPTS, BUYERS = 20, 64, 32
# Every strategy is in one list or the other, so a new one is tested without edits here.
CORRECT = [name for name, spec in STRATEGIES.items() if spec.claims_correct]
WEAK = [name for name, spec in STRATEGIES.items() if not spec.claims_correct]


def sale(client, sku: str, *, stock: int = STOCK, segments: int = 1, quantity: int = 1,
         strategy: str | None = None) -> dict:
    client.reset(sku, stock, segments=segments, strategy=strategy)
    result = burst(base_url=client.base_url, sku=sku, attempts=ATTEMPTS, concurrency=BUYERS,
                   quantity=quantity, tokens=client.tokens)
    assert result.errors == 0, result.statuses  # every answer was 201, 409 or 503
    audit = client.audit(sku)
    assert audit["orders"] == result.created
    return audit


# Segmented: 21 units in 4 segments (6, 5, 5, 5), bought 2 at a time. Each segment
# ends with 0 or 1 unit, so the last orders need two segments at once; once 1 unit
# is left in all, nothing can serve 2 more.
SEGMENTED = dict(stock=21, segments=4, quantity=2)


# Each product is reset under the strategy it tests: one deployment serves them all, as
# it serves a race's (the deployment's own strategy switch is tests/test_reload.py's).
@pytest.mark.parametrize("strategy", WEAK)
def test_weak_strategy_on_two_instances_oversells(stack_apps, strategy):
    client = stack_apps(instances=2, **RACE)
    for audit in (sale(client, f"e2e-{strategy}", strategy=strategy),
                  sale(client, f"e2e-{strategy}-seg", strategy=strategy, **SEGMENTED)):
        assert audit["oversold"] > 0 or audit["lost_updates"] > 0, audit
        assert not audit["consistent"]


def test_local_lock_in_one_process_is_correct(stack_apps):
    audit = sale(stack_apps(strategy="local", instances=1, workers=1, **RACE), "e2e-local-1")
    assert (audit["oversold"], audit["lost_updates"], audit["consistent"]) == (0, 0, True), audit
    assert audit["remaining"] == 0 and audit["orders"] == STOCK


@pytest.mark.parametrize("strategy", CORRECT)
def test_correct_strategy_on_two_instances_sells_exactly_the_stock(stack_apps, strategy):
    client = stack_apps(instances=2, **RACE)
    audit = sale(client, f"e2e-{strategy}", strategy=strategy)
    assert (audit["oversold"], audit["lost_updates"], audit["consistent"]) == (0, 0, True), audit
    assert audit["remaining"] == 0 and audit["orders"] == STOCK
    if not STRATEGIES[strategy].segmented:
        return  # the gate keeps the stock in one counter
    # The same in segments, orders spanning two of them included.
    audit = sale(client, f"e2e-{strategy}-seg", strategy=strategy, **SEGMENTED)
    assert (audit["oversold"], audit["lost_updates"], audit["consistent"]) == (0, 0, True), audit
    assert (audit["ordered_quantity"], audit["remaining"]) == (20, 1), audit
    assert audit["flow_rows"] > audit["orders"]  # some order took from two segments


def test_one_key_sent_many_times_at_once_counts_once(stack_apps):
    client = stack_apps(instances=2, **RACE)
    client.reset("e2e-retry", STOCK, strategy="atomic")
    key = uuid.uuid4().hex

    def send(_):
        from loadtest.client import FlashsaleClient

        return FlashsaleClient(client.base_url, tokens=client.tokens).order("e2e-retry", 1, "retrying-buyer",
                                                                            key=key)

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        responses = list(pool.map(send, range(16)))
    statuses = sorted(r.status_code for r in responses)
    # One request does the work; the rest are replays (200) or told it is in flight (503).
    assert statuses.count(201) == 1 and set(statuses) <= {200, 201, 503}, statuses
    created = next(r.json() for r in responses if r.status_code == 201)
    assert all(r.json() == created for r in responses if r.status_code == 200)
    audit = client.audit("e2e-retry")
    assert (audit["orders"], audit["flow_rows"], audit["remaining"]) == (1, 1, STOCK - 1)
    # And once it is done, a late retry is a replay.
    late = client.order("e2e-retry", 1, "retrying-buyer", key=key)
    assert late.status_code == 200 and late.json() == created


def test_products_of_two_strategies_sell_side_by_side_each_its_own_way(stack_apps):
    """One deployment (default atomic), two products reset under their own strategies,
    bought at the same moment by the same crowd: `none` loses updates, `gate` holds."""
    client = stack_apps(instances=2, **RACE)
    for sku, strategy in (("e2e-side-none", "none"), ("e2e-side-gate", "gate")):
        assert client.reset(sku, STOCK, strategy=strategy)["strategy"] == strategy
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(
            lambda sku: burst(base_url=client.base_url, sku=sku, attempts=ATTEMPTS, concurrency=BUYERS,
                              tokens=client.tokens),
            ["e2e-side-none", "e2e-side-gate"]))
    assert all(r.errors == 0 for r in results), [r.statuses for r in results]
    weak, held = client.audit("e2e-side-none"), client.audit("e2e-side-gate")
    assert weak["strategy"] == "none" and (weak["oversold"] > 0 or weak["lost_updates"] > 0), weak
    assert not weak["consistent"]
    assert held["strategy"] == "gate", held
    assert (held["orders"], held["oversold"], held["lost_updates"]) == (STOCK, 0, 0), held
    assert held["consistent"], held
