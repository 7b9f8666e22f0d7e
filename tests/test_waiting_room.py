"""A waiting room on the stack's two app instances: every instance asks the one room
in Redis, so together they admit at the room's rate, never at twice it, and an
admitted buyer buys through nginx with the admission it was given.

The tolerance, stated in the concept page: over T seconds after the opening the room
admits ``rate * T`` places, at most one more or one fewer (the credit's whole units),
and ``rate`` times the longest gap between two asks fewer at most (admissions are
made as buyers ask)."""

import threading
import time
import uuid

import pytest
import redis

from loadtest.buyers import MadeBuyers
from loadtest.client import FlashsaleClient
from waitingroom.store import room_keys

pytestmark = pytest.mark.e2e

RATE = 20  # admissions a second
SECONDS = 3.0  # watched after the opening
BUYERS = 150  # more than the room admits meanwhile: the queue never runs dry
OPENS_IN = 3  # seconds: time for every buyer to take its place first (longer if it was not)


def _asking(clients: list[FlashsaleClient], sku: str, buyers: list[str], until: float,
            asks: list[tuple[float, float]], errors: list) -> list[threading.Thread]:
    """One asker per instance, each through its own instance only, going round the
    buyers until ``until``; each ask's (start, end) is kept: it ran in Redis in between."""

    def ask(client: FlashsaleClient, offset: int) -> None:
        n = offset
        while time.monotonic() < until:
            start = time.monotonic()
            response = client.room(sku, buyers[n % len(buyers)])
            asks.append((start, time.monotonic()))
            if response.status_code != 200:
                errors.append(response.text)
            n += 1

    threads = [threading.Thread(target=ask, args=(client, i * len(buyers) // 2)) for i, client in
               enumerate(clients)]
    for thread in threads:
        thread.start()
    return threads


def _longest_gap(asks: list[tuple[float, float]]) -> float:
    """The longest two asks' scripts may have been apart: from one's start to the
    next one's end."""
    asks = sorted(asks)
    return max(after[1] - before[0] for before, after in zip(asks, asks[1:], strict=False))


def test_two_instances_admit_at_the_rooms_rate_and_the_admitted_buy(stack_apps, stack_config):
    through_nginx = stack_apps()
    assert stack_config.instances == 2
    tokens = MadeBuyers(stack_config)
    buyers = [f"waiter-{n}" for n in range(BUYERS)]
    tokens.signed_up(buyers)
    through_nginx.tokens = tokens
    instances = [FlashsaleClient(f"http://127.0.0.1:{stack_config.app_port_of(name)}", tokens=tokens)
                 for name in stack_config.app_names]
    # Every place taken before the opening, on both instances: a room that opens later
    # each time the machine was too slow for that, never one already open.
    for opens_in in (OPENS_IN, 2 * OPENS_IN, 4 * OPENS_IN, 8 * OPENS_IN):
        sku = f"room-rate-{uuid.uuid4().hex[:6]}"
        not_open_before = time.monotonic() + opens_in
        through_nginx.reset(sku, 1_000, strategy="gate", room_rate=RATE, room_active=10_000,
                            starts_in=opens_in)
        opens_at = time.monotonic() + opens_in
        for n, buyer in enumerate(buyers):
            state = instances[n % 2].room(sku, buyer).json()["state"]
            if state != "waiting":  # only once the room may be open: this opening was too soon
                assert time.monotonic() >= not_open_before, (buyer, state)
                break
        else:
            if time.monotonic() < not_open_before:
                break
    else:
        pytest.fail(f"{BUYERS} places were not taken in {opens_in} s")
    time.sleep(opens_at - time.monotonic())

    asks, errors = [], []
    for thread in _asking(instances, sku, buyers, time.monotonic() + SECONDS + 1, asks, errors):
        thread.join()
    assert not errors, errors[:3]

    gate = redis.Redis(port=stack_config.redis_gate_port, decode_responses=True)
    room = gate.hgetall(room_keys(sku)["room"])
    opens_ms, admission_ms = int(room["opens"]), int(room["admission_ms"])
    admitted_ms = sorted(int(end) - admission_ms for end in gate.hvals(room_keys(sku)["admitted"]))
    assert admitted_ms and admitted_ms[0] >= opens_ms  # nobody before the opening
    within = [t for t in admitted_ms if t < opens_ms + SECONDS * 1000]
    longest_gap = _longest_gap(asks)
    assert RATE * (SECONDS - longest_gap) - 1 <= len(within) <= RATE * SECONDS + 1, \
        (len(within), longest_gap)
    # No second admits a burst either. The room's credit grows at its rate and keeps at
    # most a second's worth (ask.lua): a second admits its rate, and what built up while
    # nobody asked, the longest gap between asks the machine left (at most a second's).
    built_up = RATE * min(longest_gap, 1.0)
    for second in range(int(SECONDS)):
        start = opens_ms + second * 1000
        admitted = sum(start <= t < start + 1000 for t in admitted_ms)
        assert admitted <= RATE + built_up + 1, (second, admitted, longest_gap)

    # The first admitted buys, through nginx, with its admission; a buyer still
    # waiting has none, and is refused.
    first = buyers[0]
    place = instances[1].room(sku, first).json()
    assert place["state"] == "admitted", place
    bought = through_nginx.order(sku, 1, first, admission=place["admission"])
    assert bought.status_code == 201, bought.json()
    last = buyers[-1]
    assert instances[0].room(sku, last).json()["state"] == "waiting"
    refused = through_nginx.order(sku, 1, last)
    assert (refused.status_code, refused.json()["error"], refused.json()["reason"]) == \
        (403, "admission_refused", "missing")
