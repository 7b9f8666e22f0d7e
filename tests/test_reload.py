"""A running stack brought in line while it sells (``make up``, ``stack.control``):
with two instances, no request fails, under each server, for a change that keeps the
strategy and for a new one; every invariant holds; and the new strategy's first
order comes after the old one's last (``orders.barrier``): two strategies never sell
one product at once. Leaving the gate, its accepted orders are written first."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

import pytest
import requests

from flashsale.serve import SERVERS
from loadtest.client import FlashsaleClient
from stack.config import ROOT

pytestmark = pytest.mark.e2e

# mysql-for-update then atomic: the one reads the stock under a lock row and writes
# what it computed, the other takes no lock and decrements: sold at once, the one's
# write would undo the other's decrements in between. 50 ms in the critical section
# keeps a queue of purchases in it at every moment of the switch (each strategy holds
# the row through it), at some 20 purchases a second: the CPU the switch shares.
BEFORE, AFTER = "mysql-for-update", "atomic"
RACE = dict(section_delay_ms=50.0, instances=2)
STOCK = 100_000  # never sold out: every purchase is answered 201
BUYERS, READERS = 12, 2
BUYER_PAUSE = 0.5  # leaving the gate: seconds a buyer waits after each answer
# Seconds a reader waits after each answer: some 40 reads a second keep a read in
# flight through each reload and restart (a read every 5 ms only cost CPU).
READER_PAUSE = 0.05


class Load:
    """Buyers (each purchase a new buyer and key) and readers (``/api/ping``, through
    nginx to the instances) at the stack until stopped; every answer's status kept,
    0 for a request that got none, even sent again."""

    def __init__(self, base_url: str, sku: str, tokens=None, *, pause: float = 0.0):
        # Each buyer thread one buyer (with ``tokens``, signed up before the load starts),
        # pausing ``pause`` seconds after each answer.
        self.base_url, self.sku, self.tokens, self.pause = base_url, sku, tokens, pause
        self.purchases: Counter = Counter()
        self.reads: Counter = Counter()
        self.failures: list[str] = []
        self.resent = 0  # purchases sent again after no answer
        self._stop = threading.Event()
        self._mutex = threading.Lock()
        self._threads = [threading.Thread(target=self._buyer, args=(f"buyer-{n}",), daemon=True)
                         for n in range(BUYERS)]
        if tokens is not None:
            tokens.signed_up([f"buyer-{n}" for n in range(BUYERS)])
        self._threads += [threading.Thread(target=self._reader, daemon=True) for _ in range(READERS)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _count(self, counter: Counter, status: int, why: str) -> None:
        with self._mutex:
            counter[status] += 1
            if status not in (200, 201):
                self.failures.append(why)

    def _buyer(self, buyer: str) -> None:
        client = FlashsaleClient(self.base_url, tokens=self.tokens)  # a kept-alive connection per thread
        while not self._stop.is_set():
            key = uuid.uuid4().hex
            try:
                try:
                    response = client.order(self.sku, 1, buyer, key=key)
                except requests.ConnectionError:
                    # No answer: nginx closed the kept-alive connection as it reloaded,
                    # as the request came (HTTP/1.1 has no way to warn a client first).
                    # Sent again, with its key, as a browser would: it counts once.
                    with self._mutex:
                        self.resent += 1
                    response = client.order(self.sku, 1, buyer, key=key)
                self._count(self.purchases, response.status_code, response.text[:200])
            except OSError as e:
                self._count(self.purchases, 0, f"{type(e).__name__}: {e}")
            self._stop.wait(self.pause)

    def _reader(self) -> None:
        client = FlashsaleClient(self.base_url)  # asks a read again on a new connection, as the above
        while not self._stop.is_set():
            try:
                response = client.session.get(f"{self.base_url}/api/ping", timeout=30)
                self._count(self.reads, response.status_code, response.text[:200])
            except OSError as e:
                self._count(self.reads, 0, f"{type(e).__name__}: {e}")
            time.sleep(READER_PAUSE)


def spans(stack_config, sku: str) -> dict[str, tuple[float, float]]:
    """Per strategy, the first and last moment one of ``sku``'s orders was taken: when
    the seller created it, or the gate accepted it (its row is written later)."""
    script = (
        "import json\nfrom django.db.models import Max, Min\n"
        "from django.db.models.functions import Coalesce\nfrom orders.models import Order\n"
        f"taken = Order.objects.filter(product__sku={sku!r})"
        ".annotate(at=Coalesce('accepted_at', 'created_at'))\n"
        "spans = taken.values('strategy').annotate(first=Min('at'), last=Max('at'))\n"
        "print(json.dumps({s['strategy']: [s['first'].timestamp(), s['last'].timestamp()] for s in spans}))")
    shell = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, timeout=60,
                           env=stack_config.app_environment("test"), capture_output=True, text=True)
    assert shell.returncode == 0, shell.stderr
    return {strategy: tuple(span) for strategy, span in json.loads(shell.stdout.splitlines()[-1]).items()}


def switched_under_load(stack_apps, sku: str, before: str, after: str, *, pause: float = 0.0,
                        **settings) -> tuple[Load, dict]:
    """A sale of ``sku`` (following the default) under load (each buyer pausing
    ``pause`` after each answer) while the stack switches from ``before`` to
    ``after``, then rolls once more with ``after`` (a change of the critical section's
    sleep). Returns the load and the sale's audit."""
    client = stack_apps(strategy=before, **settings)
    client.reset(sku, STOCK)  # no strategy of its own: it follows the deployment's
    with Load(client.base_url, sku, client.tokens, pause=pause) as load:
        time.sleep(1.0)
        sold_before = load.purchases[201]
        stack_apps(strategy=after, rolling=True, **settings)  # a switch: the barrier
        time.sleep(1.0)
        stack_apps(strategy=after, rolling=True,
                   **{**settings, "section_delay_ms": settings["section_delay_ms"] - 1})
        time.sleep(1.0)
    assert not load.failures, (load.purchases, load.reads, load.resent, Counter(load.failures).most_common(5))
    assert sold_before > 0 and load.purchases[201] > sold_before and load.reads[200] > 0
    return load, client.audit(sku, settle=60)


@pytest.mark.parametrize("server", SERVERS)
def test_a_reload_under_load_fails_no_request_and_never_mixes_strategies(stack_apps, stack_config, server):
    sku = f"reload-{server}-{uuid.uuid4().hex[:6]}"
    load, audit = switched_under_load(stack_apps, sku, BEFORE, AFTER, server=server, **RACE)
    assert (audit["oversold"], audit["lost_updates"], audit["consistent"]) == (0, 0, True), audit
    assert audit["orders"] == load.purchases[201], audit
    taken = spans(stack_config, sku)
    assert taken[BEFORE][1] < taken[AFTER][0], taken


def test_leaving_the_gate_under_load_writes_what_it_accepted_first(stack_apps, stack_config):
    """gate to atomic: the barrier lifts once the persisters wrote the gate's orders of
    the product and its sale in Redis is closed; atomic then sells from the database.

    The gate accepts faster than its persisters write (that is its point): buyers who
    buy again the moment they are answered keep a backlog growing, and leaving holds
    purchases until it is written, past their deadline on a busy machine. These
    buyers pause between purchases, a load the persisters keep up with."""
    sku = f"reload-gate-{uuid.uuid4().hex[:6]}"
    load, audit = switched_under_load(stack_apps, sku, "gate", "atomic", pause=BUYER_PAUSE,
                                      section_delay_ms=2.0, instances=2)
    assert (audit["oversold"], audit["consistent"], audit["gate"]) == (0, True, None), audit
    assert audit["orders"] == load.purchases[201], audit
    taken = spans(stack_config, sku)
    assert taken["gate"][1] < taken["atomic"][0], taken
