"""A burst of concurrent purchases: every buyer thread waits at a barrier, then all
fire at once, which is what a flash sale's first second looks like.

Used by ``make demo`` and the end-to-end tests; the Locust comparison is the tool
for figures over time.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from .client import FlashsaleClient


@dataclass(frozen=True)
class BurstResult:
    attempts: int
    statuses: Counter  # HTTP status → count; 0 for a request that got no response
    seconds: float

    @property
    def created(self) -> int:
        return self.statuses[201]

    @property
    def sold_out(self) -> int:
        return self.statuses[409]

    @property
    def busy(self) -> int:
        return self.statuses[503]

    @property
    def errors(self) -> int:
        return self.attempts - self.created - self.sold_out - self.busy


def burst(*, base_url: str, sku: str, attempts: int, concurrency: int, quantity: int = 1,
          tokens: Mapping[str, str] | None = None, prefix: str = "buyer-") -> BurstResult:
    """Send ``attempts`` purchases of ``quantity`` from ``concurrency`` threads at once.

    Each attempt is a distinct buyer (``<prefix><n>``) with its own Idempotency-Key;
    with ``tokens`` (buyer -> bearer token), signed in with its token.
    """
    buyers = [f"{prefix}{n}" for n in range(attempts)]
    if (ready := getattr(tokens, "signed_up", None)) is not None:
        ready(buyers)  # before the burst, not inside it (SignedUpBuyers, MadeBuyers)
    statuses: Counter = Counter()
    mutex = threading.Lock()
    barrier = threading.Barrier(concurrency + 1)
    tickets = iter(range(attempts))

    def buyer() -> None:
        client = FlashsaleClient(base_url, tokens=tokens)  # a session (keep-alive connection) per thread
        barrier.wait()
        while True:
            with mutex:
                n = next(tickets, None)
            if n is None:
                return
            try:
                status = client.order(sku, quantity, buyers[n], key=uuid.uuid4().hex).status_code
            except OSError:
                status = 0
            with mutex:
                statuses[status] += 1

    threads = [threading.Thread(target=buyer, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.monotonic()
    for t in threads:
        t.join()
    return BurstResult(attempts=attempts, statuses=statuses, seconds=time.monotonic() - started)
