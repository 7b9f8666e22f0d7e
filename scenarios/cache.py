"""S19: a hot cache entry expires while a crowd reads it (cache breakdown, 缓存击穿).

The product's row is read with a real query that takes 50 ms (``SLEEP``), the time a
heavier read of a real catalogue would take: the window in which the crowd misses.
It uses the Django models and cache, so the runner sets Django up first.
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


def _crowd(reader, sku: str) -> tuple[list[str], float]:
    """``READERS`` threads released together read ``sku``; what each got, and the
    slowest one's wait in ms."""
    from flashsale.testing import run_at_once

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

    from flashsale.readcache import LogicalExpiry, MutexRebuild
    from inventory.models import Product

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
    logical = LogicalExpiry(load=load, key=key, fresh_s=lambda: 1.0)
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
]
