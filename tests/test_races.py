"""A race through the stack: its API on nginx, its runner the stack's own process
(``racer``), its buyers through nginx to both instances."""

import time

import pytest

from common.history import Purchase, read
from stack.servers import race_histories
from verdicts.checker import check

pytestmark = pytest.mark.e2e

RACE = {"strategies": ["none", "atomic"], "stock": 50, "buyers": 400, "concurrency": 64}


def race_start(client, body: dict, *, wait: float = 120.0) -> dict:
    """Start ``body``'s race once no other runs (schemathesis may have left one)."""
    deadline = time.monotonic() + wait
    while True:
        response = client.race_start(**body)
        if response.status_code != 409 or time.monotonic() > deadline:
            assert response.status_code == 201, response.text
            return response.json()
        race_follow(client, response.json()["race_id"])


def race_follow(client, race_id: int, *, wait: float = 120.0) -> list[dict]:
    """Every state the race was read in, every 50 ms, until it is over."""
    seen, deadline = [], time.monotonic() + wait
    while time.monotonic() < deadline:
        response = client.race(race_id)
        if response.status_code == 404:
            return seen  # a newer race replaced it
        seen.append(response.json())
        if seen[-1]["status"] not in ("queued", "running"):
            return seen
        time.sleep(0.05)
    raise AssertionError(f"race {race_id} still {seen[-1]['status']} after {wait} s")


def test_a_race_shows_none_oversell_beside_atomic_and_agrees_with_the_audits(stack_apps, stack_config):
    client = stack_apps(strategy="atomic", instances=2, section_delay_ms=20.0)
    race = race_start(client, RACE)
    second = client.race_start(**RACE)
    assert second.status_code == 409 and second.json()["race_id"] == race["id"], second.text

    seen = race_follow(client, race["id"])
    final = seen[-1]
    assert final["status"] == "finished", final
    # Followed while it ran: the figures grew between reads, not only at the end.
    running = [s for s in seen if s["status"] == "running" and 0 < s["answered"] < s["total"]]
    assert len({s["answered"] for s in running}) >= 2, [s["answered"] for s in seen]
    assert final["answered"] == final["total"] == 800

    none, atomic = final["lanes"]
    for lane in (none, atomic):
        audit = client.audit(lane["sku"])
        assert audit["strategy"] == lane["strategy"]
        assert (lane["orders"], lane["oversold"], lane["lost_updates"], lane["consistent"]) == (
            audit["orders"], audit["oversold"], audit["lost_updates"], audit["consistent"]), (lane, audit)
        assert lane["orders"] + lane["sold_out"] + lane["busy"] + lane["errors"] == RACE["buyers"]
    assert none["oversold"] > 0 and none["verdict"] == f"oversold by {none['oversold']}", none
    assert (atomic["orders"], atomic["oversold"], atomic["verdict"]) == (50, 0, "held"), atomic
    # The runner recorded the race's history: every try, checked per product.
    events = read(race_histories(stack_config) / f"race-{race['id']}.jsonl")
    assert sum(isinstance(e, Purchase) for e in events) == 800
    verdicts = {sku.sku: sku.linearizable for sku in check(events).skus}
    assert verdicts == {none["sku"]: False, atomic["sku"]: True}
