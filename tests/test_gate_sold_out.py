"""A sold-out gate sale on the running stack: every gunicorn worker remembers it sold
out and answers from memory (``orders.gate.lifecycle``), yet a replay is still its order's, and
the moment a reset answers, every worker sells the new sale.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from loadtest.client import FlashsaleClient

pytestmark = pytest.mark.e2e

# Purchases from many connections at once, so that each of the stack's workers
# answers some (and so remembers the sale sold out).
SPREAD = 80


def spread(client: FlashsaleClient, sku: str, keys: list[str]) -> list[int]:
    """One purchase per key, by a buyer of its own (``client``'s), each on a connection
    of its own, 8 at once through nginx; their statuses."""
    def one(key: str) -> int:
        alone = FlashsaleClient(client.base_url, tokens=client.tokens)
        return alone.order(sku, 1, f"buyer-{key}", key=key).status_code

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, keys))


def test_a_sold_out_sale_answers_its_replays_and_a_reset_reopens_it_on_every_worker(stack_apps):
    client = stack_apps()  # the sale is the gate's by its reset
    sku = f"gate-sold-out-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 2, strategy="gate")
    # Keys unique to the run: a key names one order across every product.
    first = {key: client.order(sku, 1, f"buyer-{key}", key=key).json()["order_id"]
             for key in (f"{sku}-a", f"{sku}-b")}
    assert spread(client, sku, [f"{sku}-late-{i}" for i in range(SPREAD)]) == [409] * SPREAD
    for _ in range(8):  # whichever worker answers: the order, not "sold out"
        for key, order_id in first.items():
            replay = client.order(sku, 1, f"buyer-{key}", key=key)
            assert (replay.status_code, replay.json()["order_id"]) == (200, order_id), replay.text

    client.reset(sku, SPREAD, strategy="gate")  # every worker remembers the old sale sold out
    assert spread(client, sku, [f"{sku}-new-{i}" for i in range(SPREAD)]) == [201] * SPREAD
    audit = client.audit(sku, settle=60)
    assert (audit["orders"], audit["remaining"], audit["consistent"]) == (SPREAD, 0, True), audit
