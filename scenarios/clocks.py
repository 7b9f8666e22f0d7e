"""Expiry judged by the clients' clocks: article 004's GETSET takeover (S14)."""

from __future__ import annotations

import time

from locking import LockNotOwnedError
from locking.teaching.redis_naive import GetsetExpiryLock

from .base import Half, Outcome, Scenario
from .context import Context

LEASE_MS = 300
SKEW = 1.0  # seconds C's clock runs ahead


def fast_clock() -> float:
    return time.time() + SKEW


def _figures(took_over: dict[str, bool], a_deleted: bool) -> dict:
    return {"B took over A's expired lock": took_over["B"],
            f"C (clock {SKEW:g} s fast) took over too": took_over["C"],
            "holders at once": sum(took_over.values()), "A's late release deleted a lock": a_deleted}


def s14_getset_takeover(ctx: Context) -> Outcome:
    """A takes the lock and stalls past its lease. B takes over, as it should; then
    C, whose clock runs ahead, also finds the lock expired and takes over from B."""

    def naive() -> dict:
        key = ctx.key("s14-getset")
        a = GetsetExpiryLock(ctx.client, key, lease_ms=LEASE_MS)
        b = GetsetExpiryLock(ctx.client, key, lease_ms=LEASE_MS)
        c = GetsetExpiryLock(ctx.client, key, lease_ms=LEASE_MS, clock=fast_clock)
        assert a.acquire()
        time.sleep(LEASE_MS / 1000 + 0.1)  # A stalls past its lease
        took_over = {"B": b.acquire(), "C": c.acquire()}
        a_deleted = a.release()
        figures = _figures(took_over, a_deleted)
        for lock, held in zip((b, c), took_over.values(), strict=True):
            if held:
                lock.release()
        return figures

    def token_and_lua() -> dict:
        backend = ctx.setnx(ttl_ms=LEASE_MS)
        a, b, c = backend.lock("s14"), backend.lock("s14"), backend.lock("s14")
        assert a.acquire(blocking=False)
        time.sleep(LEASE_MS / 1000 + 0.1)  # Redis expires the key: one clock, the server's
        took_over = {"B": b.acquire(blocking=False)}
        # C's clock does not enter into it: nothing in the lock reads the client's time.
        took_over["C"] = c.acquire(blocking=False)
        try:
            a.release()
            a_deleted = True
        except LockNotOwnedError:
            a_deleted = False
        figures = _figures(took_over, a_deleted)
        if took_over["B"]:
            b.release()
        return figures

    figures = naive()
    broken = Half("SETNX expiry time + GETSET takeover", figures, failed=figures["holders at once"] > 1)
    figures = token_and_lua()
    fixed = Half("SET NX PX token, Lua compare-and-delete", figures,
                 failed=figures["holders at once"] != 1 or figures["A's late release deleted a lock"])
    return Outcome(broken, fixed)


SCENARIOS = [
    Scenario("S14", "GETSET expiry takeover", "004 第二种",
             "The article stores the holder's expiry time as the value and lets a client take over "
             "a lock whose time has passed, with GETSET so that only one taker wins. But "
             "'passed' is judged by each client's own clock: A stalls past its 300 ms lease, B "
             "takes over, and C, whose clock runs 1 s ahead, finds B's fresh lock expired and "
             "takes over too. Two clients believe they took over. The fix lets Redis alone "
             "decide expiry (SET NX PX) and ties release to a token.",
             s14_getset_takeover),
]
