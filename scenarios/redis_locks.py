"""The SETNX pitfalls of articles 000, 001, 003 and 004, each broken and fixed.

Faults are injected, not waited for: an exception thrown in the business code, a
process killed with SIGKILL, a crash between two commands, a holder paused past its
lease by a sleep longer than the TTL Redis enforces.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from locking import LockNotOwnedError
from locking.teaching.redis_naive import NaiveSetnxLock
from stack.config import ROOT

from .base import Half, Outcome, Scenario
from .context import Context

LATER_BUYERS = 5


class BusinessError(Exception):
    """The purchase's own code failing while the lock is held."""


def s2_exception_before_release(ctx: Context) -> Outcome:
    # Broken: the seed's first version, release only on the happy path.
    key = ctx.key("s2")
    first = NaiveSetnxLock(ctx.client, key)
    try:
        if first.acquire():
            raise BusinessError("stock service timed out")
            first.release()  # never reached
    except BusinessError:
        pass
    refused = sum(not NaiveSetnxLock(ctx.client, key).acquire() for _ in range(LATER_BUYERS))
    broken = Half("SETNX, release after the business code",
                  {"later buyers refused": f"{refused}/{LATER_BUYERS}",
                   "lock key left behind": bool(ctx.client.exists(key))},
                  failed=refused == LATER_BUYERS)

    # Fixed: the lock as a context manager, released in __exit__ (a finally).
    backend = ctx.setnx()
    try:
        with backend.lock("s2"):
            raise BusinessError("stock service timed out")
    except BusinessError:
        pass
    refused = later_buyers_refused_then_release(backend, "s2")
    fixed = Half("`with lock:` (release in finally)",
                 {"later buyers refused": f"{refused}/{LATER_BUYERS}",
                  "lock key left behind": bool(ctx.client.exists(f"{backend.key_prefix}s2"))},
                 failed=refused > 0)
    return Outcome(broken, fixed)


def later_buyers_refused_then_release(backend, name: str) -> int:
    refused = 0
    for _ in range(LATER_BUYERS):
        lock = backend.lock(name)
        if lock.acquire(blocking=False):
            lock.release()
        else:
            refused += 1
    return refused


def _hold_in_a_process_and_kill(ctx: Context, kind: str, key: str, ttl_ms: int) -> float | None:
    """A process takes the lock and is killed with SIGKILL; seconds until someone
    else can take it (None: not within 2 s + the ttl)."""
    holder = subprocess.Popen(
        [sys.executable, "-m", "scenarios.holder", kind, ctx.redis_url, key, str(ttl_ms)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )
    try:
        if holder.stdout.readline().strip() != "held":
            raise RuntimeError("the holder process did not take the lock")
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        killed = time.monotonic()
        deadline = killed + 2 + ttl_ms / 1000
        while time.monotonic() < deadline:
            if NaiveSetnxLock(ctx.client, key, ttl_ms=60_000).acquire():
                return time.monotonic() - killed
            time.sleep(0.02)
        return None
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def s3_holder_dies_without_expiry(ctx: Context) -> Outcome:
    freed = _hold_in_a_process_and_kill(ctx, "setnx-no-expiry", ctx.key("s3-broken"), 0)
    broken = Half("SETNX without expiry", {"holder killed (SIGKILL)": True,
                                           "freed after (s)": freed if freed is not None else "never (2 s)"},
                  failed=freed is None)
    freed = _hold_in_a_process_and_kill(ctx, "set-nx-px", ctx.key("s3-fixed"), 500)
    fixed = Half("SET NX PX 500", {"holder killed (SIGKILL)": True,
                                   "freed after (s)": freed if freed is not None else "never (2.5 s)"},
                 failed=freed is None)
    return Outcome(broken, fixed)


class Crash(Exception):
    """The process dies here (the rest of the command sequence never runs)."""


def s4_crash_between_setnx_and_expire(ctx: Context) -> Outcome:
    key = ctx.key("s4")

    def crash():
        raise Crash

    lock = NaiveSetnxLock(ctx.client, key, ttl_ms=500, separate_expire=True, between_set_and_expire=crash)
    try:
        lock.acquire()
    except Crash:
        pass
    ttl = ctx.client.pttl(key)
    time.sleep(0.7)
    still_held = bool(ctx.client.exists(key))
    broken = Half("SETNX, then EXPIRE (crash in between)",
                  {"TTL of the lock key (ms)": "none (-1)" if ttl == -1 else ttl,
                   "still held 0.7 s later": still_held}, failed=still_held and ttl == -1)

    backend = ctx.setnx(ttl_ms=500)
    backend.lock("s4").acquire()  # and the process dies right after: nothing left to run
    fixed_key = f"{backend.key_prefix}s4"
    ttl = ctx.client.pttl(fixed_key)
    time.sleep(0.7)
    still_held = bool(ctx.client.exists(fixed_key))
    fixed = Half("one SET NX PX", {"TTL of the lock key (ms)": ttl, "still held 0.7 s later": still_held},
                 failed=still_held or ttl <= 0)
    return Outcome(broken, fixed)


def _third_buyer(make, release_a) -> dict:
    """A holds a 200 ms lock and pauses 300 ms; B takes the expired lock; A releases;
    can C get in while B still believes it holds the lock?"""
    a, b, c = make(200), make(5_000), make(5_000)
    assert a.acquire()
    time.sleep(0.3)  # A paused past its lease: Redis expired the key
    assert b.acquire(blocking=False)
    deleted = release_a(a)
    c_in = c.acquire(blocking=False)
    return {"A's release deleted B's lock": deleted, "C got in while B held": c_in,
            "holders at once": 2 if c_in else 1}


def s6_release_without_owner_check(ctx: Context) -> Outcome:
    key = ctx.key("s6")
    figures = _third_buyer(lambda ttl: NaiveSetnxLock(ctx.client, key, ttl_ms=ttl, release="del"),
                           lambda a: a.release())
    broken = Half("DEL without owner check", figures, failed=figures["C got in while B held"])
    figures = _third_buyer(lambda ttl: ctx.setnx(ttl_ms=ttl).lock("s6"), _release_refused)
    fixed = Half("token + compare-and-delete", figures, failed=figures["C got in while B held"])
    return Outcome(broken, fixed)


def _release_refused(lock) -> bool:
    """Release with the project's lock; True if it deleted anything (it must not)."""
    try:
        lock.release()
    except LockNotOwnedError:
        return False
    return True


def s7_get_then_del_in_the_client(ctx: Context) -> Outcome:
    key = ctx.key("s7")
    b = NaiveSetnxLock(ctx.client, key, ttl_ms=5_000)

    def expire_and_let_b_in():
        time.sleep(0.3)  # between A's GET (its token, still valid) and A's DEL
        b.acquire()

    a = NaiveSetnxLock(ctx.client, key, ttl_ms=200, release="get_then_del",
                       between_get_and_del=expire_and_let_b_in)
    a.acquire()
    deleted = a.release()
    c_in = NaiveSetnxLock(ctx.client, key, ttl_ms=5_000).acquire()
    broken = Half("GET, compare in the client, then DEL",
                  {"A's release deleted B's lock": deleted, "C got in while B held": c_in,
                   "holders at once": 2 if c_in else 1}, failed=c_in)
    # The fix has no gap to pause in: compare and delete are one Lua script.
    figures = _third_buyer(lambda ttl: ctx.setnx(ttl_ms=ttl).lock("s7"), _release_refused)
    fixed = Half("one Lua compare-and-delete", figures, failed=figures["C got in while B held"])
    return Outcome(broken, fixed)


def s8_nested_acquire(ctx: Context) -> Outcome:
    def nested(lock) -> dict:
        assert lock.acquire()
        started = time.monotonic()
        inner = lock.acquire(timeout=1)
        blocked = time.monotonic() - started
        if inner:
            lock.release()
        lock.release()
        return {"inner acquire": "got it" if inner else "gave up", "blocked (s)": round(blocked, 2)}

    figures = nested(ctx.setnx(ttl_ms=5_000).lock("s8"))
    broken = Half("setnx (not reentrant)", figures, failed=figures["inner acquire"] == "gave up")
    figures = nested(ctx.redisson().lock("s8"))
    fixed = Half("redisson (hold count per thread)", figures, failed=figures["inner acquire"] != "got it")
    return Outcome(broken, fixed)


SCENARIOS = [
    Scenario("S2", "SETNX, business raises before release", "001 ①",
             "The article's first SETNX lock releases after the business code; when that code "
             "throws, the key stays and every later buyer is refused. You will see a purchase "
             "fail inside the lock, then five later buyers try.", s2_exception_before_release),
    Scenario("S3", "SETNX without expiry, holder process dies", "001 ②, 003",
             "A lock with no expiry is freed only by its holder. A process takes it and is "
             "killed with SIGKILL; you will see whether anyone can take it afterwards.",
             s3_holder_dies_without_expiry),
    Scenario("S4", "SETNX then a separate EXPIRE, crash in between", "004",
             "Two commands are not atomic: a crash after SETNX and before EXPIRE leaves a key "
             "with no TTL. You will see the TTL each version leaves.", s4_crash_between_setnx_and_expire),
    Scenario("S6", "release without owner check", "000 问题1, 003",
             "A's lease expires while it still works; B takes the lock; A finishes and DELetes "
             "the key, which is now B's; C walks in. You will see whether C gets in.",
             s6_release_without_owner_check),
    Scenario("S7", "owner check as client-side GET then DEL", "001",
             "Checking the owner with GET and then calling DEL leaves a gap: the key can expire "
             "and change hands between the two. A pause is injected in that gap.",
             s7_get_then_del_in_the_client),
    Scenario("S8", "nested acquire on a non-reentrant lock", "000 问题3, 004",
             "A thread that holds a lock and asks for it again waits for itself. You will see "
             "a nested acquire with a 1 s timeout on each lock.", s8_nested_acquire),
]


def s5_lease_expires_while_working(ctx: Context) -> Outcome:
    """A holds the lock and is paused (GC, a slow call) for 0.8 s; its lease is
    0.3 s. Does B get in while A is still inside?"""

    def run(backend) -> dict:
        inside, most, lost = 0, 0, []
        count = threading.Lock()
        a_inside = threading.Event()

        def buyer(work_seconds: float, is_a: bool) -> None:
            nonlocal inside, most
            lock = backend.lock("s5")
            assert lock.acquire(timeout=5)
            with count:
                inside += 1
                most = max(most, inside)
            if is_a:
                a_inside.set()
            time.sleep(work_seconds)
            with count:
                inside -= 1
            try:
                lock.release()
            except LockNotOwnedError:
                lost.append(is_a)

        a = threading.Thread(target=buyer, args=(0.8, True))
        a.start()
        a_inside.wait(5)
        b = threading.Thread(target=buyer, args=(0.05, False))
        b.start()
        a.join()
        b.join()
        return {"holders inside at once (most)": most, "A's release found its lock gone": bool(lost)}

    figures = run(ctx.setnx(ttl_ms=300))
    broken = Half("setnx, 300 ms ttl", figures, failed=figures["holders inside at once (most)"] > 1)
    figures = run(ctx.redisson(watchdog_timeout_ms=300))
    fixed = Half("redisson, watchdog renewing a 300 ms lease", figures,
                 failed=figures["holders inside at once (most)"] > 1)
    return Outcome(broken, fixed)


SCENARIOS.append(
    Scenario("S5", "lease expires while the holder still works", "000 问题2, 001 ③",
             "A lock with a fixed TTL expires when the holder is slower than the TTL (a long GC "
             "pause, a slow downstream call): the next buyer walks in while the first is still "
             "inside. A is paused 0.8 s under a 0.3 s lease.", s5_lease_expires_while_working))
