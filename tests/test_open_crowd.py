"""An open crowd sees a stall that a closed one hides (coordinated omission).

The same stall, both app instances frozen (SIGSTOP) for two seconds, is planted in
two Locust runs against the stack: a closed crowd (10 buyers, each asking again as
soon as it is answered, 2,000 purchases) and an open one (800 buyers arriving each
once, whatever the answers, at 100 a second or half the rate the closed crowd was
served at outside its stall, whichever is lower: an open crowd above the stack's
capacity would queue without a stall, and see refusals). The closed crowd sends
nothing while it waits: ten of its 2,000 answers are slow, and its p99 does not see
them. The open crowd keeps arriving: every buyer that came during the stall waited
for its end, counted from its scheduled arrival, so its p99 is at least the stall
less the arrivals of the top one per cent.
"""

import math
import threading
import time
import uuid

import pytest

from loadtest.buyers import buyers_file
from loadtest.compare import BUYER_PREFIX, LocustRun, run_locust
from loadtest.figures import percentile
from stack.supervisor import Supervisor
from tests.test_compare import edge_counts, edge_counts_settled
from tests.test_prometheus import eventually

pytestmark = pytest.mark.e2e

STALL_S = 2.0
MAX_RATE, ARRIVALS = 100, 800
CLOSED_USERS, CLOSED_ATTEMPTS = 10, 2000


def stalled_run(config, *, answered_before_stall: int, **locust) -> tuple[LocustRun, float]:
    """A Locust run with both app instances frozen for ``STALL_S`` once nginx has
    answered ``answered_before_stall`` of its purchases; the run and how long the
    stall lasted."""
    before = sum(edge_counts_settled(config).values())
    done: list = []
    runner = threading.Thread(target=lambda: done.append(run_locust(base_url=config.base_url, **locust)))
    runner.start()
    assert eventually(lambda: sum(edge_counts(config).values()) - before >= answered_before_stall,
                      seconds=60, every=0.05)
    with Supervisor(config).paused(config.app_names):
        # Timed inside the pause: from the last instance stopped to before the first
        # resumes, no instance serves. Outside it, the supervisor's calls that stop
        # and resume them would count as stall while an instance still serves.
        frozen = time.monotonic()
        time.sleep(STALL_S)
        stall = time.monotonic() - frozen
    runner.join(timeout=300)
    assert done, "the Locust run failed"
    return done[0], stall


def latencies(run: LocustRun) -> list[float]:
    return [end - start for start, end, *_ in run.answers]


def served_rate(run: LocustRun, stall: float) -> float:
    """Answers a second over the run, its stall left out."""
    span = max(end for _, end, *_ in run.answers) - min(start for start, *_ in run.answers)
    return len(run.answers) / max(span - stall, 0.1)


@pytest.mark.usefixtures("stack_watchers")  # the edge's counts: mtail
def test_an_open_crowd_shows_a_stall_that_a_closed_one_hides(stack_apps, stack_config, tmp_path):
    client = stack_apps(strategy="atomic")
    sku = f"stall-{uuid.uuid4().hex[:6]}"
    client.reset(sku, stock=100_000)  # every purchase buys: the answers are alike
    tokens = (buyers_file(stack_config, tmp_path / "buyers.tsv", prefix=BUYER_PREFIX, count=ARRIVALS)
              if stack_config.buyer_auth else None)
    common = {"sku": sku, "retry_share": 0, "tokens": tokens}

    closed, closed_stall = stalled_run(
        stack_config, answered_before_stall=200, out=tmp_path / "closed", endpoint="purchase",
        users=CLOSED_USERS, attempts=CLOSED_ATTEMPTS, **common)
    # Within what this machine serves: the open crowd measures the stall, not a queue.
    rate = min(MAX_RATE, served_rate(closed, closed_stall) / 2)
    opened, open_stall = stalled_run(
        stack_config, answered_before_stall=100, out=tmp_path / "open", endpoint="open",
        users=ARRIVALS, attempts=ARRIVALS, rate=rate, open_at=time.time() + 4, **common)

    for run, count in ((closed, CLOSED_ATTEMPTS), (opened, ARRIVALS)):
        assert len(run.answers) == count and {a[2] for a in run.answers} == {"created"}
    # The closed crowd: at most one slow answer a buyer, fewer than the 1% above its p99.
    closed_p99 = percentile(latencies(closed), 99)
    assert CLOSED_USERS < CLOSED_ATTEMPTS - math.ceil(0.99 * CLOSED_ATTEMPTS) + 1
    assert closed_p99 < closed_stall / 2, (closed_p99, closed_stall)
    assert max(latencies(closed)) >= closed_stall * 0.9  # the stall was there to see
    # The open crowd: the top 1% of its answers hold at least the buyers who arrived in
    # the stall's first (that many / rate) seconds, each waiting out the rest of it.
    top = ARRIVALS - math.ceil(0.99 * ARRIVALS) + 1
    open_p99 = percentile(latencies(opened), 99)
    assert open_p99 >= open_stall - top / rate, (open_p99, open_stall, rate)
    assert open_p99 >= STALL_S - top / rate
