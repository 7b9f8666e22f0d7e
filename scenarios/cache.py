"""The cache pitfalls of article 004 (docs/reference/sources.md), on the Django
models and cache (the runner sets Django up first):

- S19: a hot cache entry expires while a crowd reads it (cache breakdown, 缓存击穿).
  The product's row is read with a real query that takes 50 ms (``SLEEP``), the
  time a heavier read of a real catalogue would take: the window in which the crowd
  misses.
- S20: a rebuild that read the row before an update writes the old value back
  after the update deleted the entry, and the cache stays wrong until it expires.
"""

from __future__ import annotations

import threading
import time
import uuid

from .base import Half, Outcome, Scenario
from .context import Context

READERS = 200
LOAD_S = 0.05


class CacheAside:
    """The broken variant: the entry expires for real, and every reader that misses
    reads the database and writes the entry back."""

    def __init__(self, *, load, key, ttl_s: float):
        self.load, self.key, self.ttl_s = load, key, ttl_s

    def get(self, name: str):
        from django.core.cache import cache

        value = cache.get(self.key(name))
        if value is None:
            value = self.load(name)
            cache.set(self.key(name), value, timeout=self.ttl_s)
        return value

    def update(self, name: str, change):
        """Write the row, then delete the entry (the textbook order)."""
        from django.core.cache import cache

        result = change()
        cache.delete(self.key(name))
        return result


# A freshness no crowd of readers outlasts (S19's logical expiry).
REBUILT_FRESH_S = 60.0


def _crowd(reader, sku: str) -> tuple[list[str], float]:
    """``READERS`` threads released together read ``sku``; what each got, and the
    slowest one's wait in ms."""
    from common.testing import run_at_once

    got, slowest = [], [0.0]
    mutex = threading.Lock()

    def read(i: int) -> None:
        started = time.perf_counter()
        value = reader.get(sku)
        waited = (time.perf_counter() - started) * 1000
        with mutex:
            got.append(value)
            slowest[0] = max(slowest[0], waited)

    errors = [e for e in run_at_once(read, READERS) if e is not None]
    if errors:
        raise errors[0]
    return got, round(slowest[0])


def s19_cache_breakdown(ctx: Context) -> Outcome:
    from django.core.cache import cache
    from django.db import connection

    from inventory.models import Product
    from inventory.readcache import LogicalExpiry

    from .rebuilds import MutexRebuild

    sku = f"s19-{uuid.uuid4().hex[:8]}"
    Product.objects.create(sku=sku, name="the hot product, v1")
    queries: list[str] = []

    def load(name: str) -> str:
        """The product's name, read with a query of 50 ms; every call counted."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT name, SLEEP(%s) FROM inventory_product WHERE sku = %s", [LOAD_S, name])
            value = cursor.fetchone()[0]
        queries.append(name)
        return value

    def key(name: str) -> str:
        return ctx.key(f"s19:{name}")

    # Broken: the entry has just expired (it is gone) as the crowd arrives.
    cache.delete(key(sku))
    got, slowest = _crowd(CacheAside(load=load, key=key, ttl_s=60), sku)
    broken = Half("cache-aside: whoever misses reads the database",
                  {"database queries": len(queries), "slowest reader (ms)": slowest},
                  failed=len(queries) > 1)

    # Fixed, once: the same expiry, a lock (redisson) on the rebuild.
    cache.delete(key(sku))
    queries.clear()
    got, slowest = _crowd(MutexRebuild(load=load, key=key, ttl_s=60, locks=ctx.redisson(), wait_s=10), sku)
    mutex_queries, mutex_slowest, mutex_answers = len(queries), slowest, len(got)

    # Fixed, twice: the entry is past its freshness but still there; the row has
    # changed meanwhile. One reader rebuilds, nobody waits, some get the old name.
    # The rebuilder's claim and the entry it writes stay fresh longer than the crowd
    # takes to read, however slow the machine: one rebuild is what this half shows.
    logical = LogicalExpiry(load=load, key=key, fresh_s=lambda: REBUILT_FRESH_S)
    cache.set(key(sku), ("the hot product, v1", time.time() - 1), timeout=60)
    Product.objects.filter(sku=sku).update(name="the hot product, v2")
    queries.clear()
    got, slowest = _crowd(logical, sku)
    fixed = Half("a mutex on the rebuild (redisson) / a logical expiry",
                 {"database queries": mutex_queries, "slowest reader (ms)": mutex_slowest,
                  "database queries, logical expiry": len(queries),
                  "slowest reader, logical expiry (ms)": slowest,
                  "readers given the old value, logical expiry": got.count("the hot product, v1")},
                 failed=mutex_queries != 1 or mutex_answers != READERS or len(queries) != 1)
    Product.objects.filter(sku=sku).delete()
    return Outcome(broken, fixed)


AFTER_READS = 100


def s20_stale_cache_after_update(ctx: Context) -> Outcome:
    from django.core.cache import cache

    from common.testing import start_thread
    from inventory.models import Product

    from .rebuilds import GuardedCacheAside

    sku = f"s20-{uuid.uuid4().hex[:8]}"
    Product.objects.create(sku=sku, name="v1")
    rw = ctx.redisson_rw()

    def key(name: str) -> str:
        return ctx.key(f"s20:{name}")

    def interleave(make, writer_in_line) -> dict[str, object]:
        """Article 004's interleaving, forced: a reader misses and reads the row (v1) and
        stops there; a writer updates the row (v2) and deletes the entry, or waits
        for the reader if it must (``writer_in_line()`` tells); then the reader writes
        what it read. Then ``AFTER_READS`` reads, after the update has completed.
        ``make(load)`` builds the cache under test."""
        Product.objects.filter(sku=sku).update(name="v1")
        cache.delete(key(sku))
        row_read, go_on = threading.Event(), threading.Event()

        def load(name: str) -> str:
            value = Product.objects.values_list("name", flat=True).get(sku=name)
            if not row_read.is_set():  # the first load only: the rebuild under test
                row_read.set()
                go_on.wait(10)
            return value

        cached = make(load)
        reader, _ = start_thread(lambda: cached.get(sku))
        assert row_read.wait(10), "the reader never read the row"
        started = time.perf_counter()
        writer, written = start_thread(
            lambda: cached.update(sku, lambda: Product.objects.filter(sku=sku).update(name="v2")))
        deadline = time.monotonic() + 10
        while not writer_in_line(writer):
            if time.monotonic() > deadline:
                raise AssertionError("the writer neither finished nor waited")
            time.sleep(0.005)
        go_on.set()
        reader.join()
        writer.join()
        if "error" in written:
            raise written["error"]
        waited = round((time.perf_counter() - started) * 1000)
        entry = cache.get(key(sku))
        after = [cached.get(sku) for _ in range(AFTER_READS)]
        return {"row after the update": Product.objects.get(sku=sku).name,
                "entry after the update": entry or "(none: the next read loads the row)",
                f"reads after the update given v1 (of {AFTER_READS})": after.count("v1"),
                "entry stays wrong for (s)": cache.ttl(key(sku)) if entry == "v1" else 0,
                "update done after (ms)": waited}

    # Broken: nothing orders the two; the writer runs straight through.
    broken = interleave(lambda load: CacheAside(load=load, key=key, ttl_s=60),
                        lambda writer: not writer.is_alive())
    broken_stale = broken[f"reads after the update given v1 (of {AFTER_READS})"]

    # Fixed: the rebuild holds the read lock, the update the write lock; the writer
    # is in line (marked waiting) while the reader finishes.
    guard = rw.read_write_lock(f"cache:{key(sku)}").write
    fixed = interleave(lambda load: GuardedCacheAside(load=load, key=key, ttl_s=60, locks=rw, wait_s=10),
                       lambda writer: bool(guard.waiting()))
    fixed_stale = fixed[f"reads after the update given v1 (of {AFTER_READS})"]
    Product.objects.filter(sku=sku).delete()
    return Outcome(Half("cache-aside: update the row, delete the entry; rebuild on a miss", broken,
                        failed=broken_stale > 0),
                   Half("a read-write lock (redisson-rw): rebuild under the read lock, update "
                        "under the write lock", fixed, failed=fixed_stale > 0))


SCENARIOS = [
    Scenario("S19", "a hot cache entry expires under a crowd: every reader reads the database",
             "004 (缓存击穿: the read-write lock's catalogue cache)",
             "A cache-aside entry that expires under a crowd sends every reader that misses to "
             "the database at once, each to rebuild the same entry. Two fixes: a lock on the "
             "rebuild (taken through locking: one reader loads, the rest wait and then read what "
             "it wrote), or a logical expiry (the entry outlives its freshness; one reader "
             "rebuilds it and the rest answer with the old value, nobody waits). You will see "
             f"{READERS} readers released together on a row whose read takes 50 ms, and the "
             "queries the database ran in each half.",
             s19_cache_breakdown, needs=("redis", "mysql")),
    Scenario("S20", "a rebuild writes the old value back after an update: the cache stays wrong",
             "004 (读写锁: the catalogue cache's read-write lock, catalogJson-lock)",
             "Cache-aside updates the row and then deletes the entry. A reader that missed "
             "just before, and read the old row, writes the old value back after the delete, "
             "and every reader gets it until the entry expires. Article 004 puts a read-write "
             "lock around both: the rebuild takes the read lock (rebuilds run side by side), "
             "the update the write lock (it waits for the rebuilds under way). You will see "
             "the interleaving forced step by step, then what the next "
             f"{AFTER_READS} reads are given.",
             s20_stale_cache_after_update, needs=("redis", "mysql")),
]
