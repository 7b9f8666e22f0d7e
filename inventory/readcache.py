"""Keeping a hot cache entry from sending every reader to the database at the
moment it expires (cache breakdown, 缓存击穿; scenario S19 runs it beside the plain
cache-aside that does, and beside a rebuild under a lock, ``scenarios.rebuilds``):

- ``LogicalExpiry``: the entry carries the moment it stops being fresh and lives
  much longer. A reader that finds it stale answers with it anyway; one reader per
  freshness period (whose ``SET NX`` of a fill flag succeeds) loads the value and
  writes it back. Nobody waits; a reader may get a value up to one period plus one
  load old. The product page's read and the sale's public summary use this
  (``inventory.reads``, ``orders.selectors``).

It runs on the shared cache (django-redis). With no entry at all (a cold cache),
the reader that claims the flag loads; the others wait for its entry up to
``cold_wait_s``, then load themselves. A Redis that is slow or gone costs loads,
never the answer, and not one per reader: each process then loads once a freshness
period and answers its other readers with that (a single flight per process; with
no shared store, once per process is the least).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar, cast

from common.cache_errors import UNREADABLE, cache_awaited, cache_claimed, cache_read, cache_write

COLD_POLL_S = 0.02  # how often a reader of a cold entry looks for the loader's

T = TypeVar("T")


class LogicalExpiry(Generic[T]):
    def __init__(self, *, load: Callable[[str], T], key: Callable[[str], str],
                 fresh_s: Callable[[], float], keep_s: Callable[[], float] = lambda: 300,
                 cold_wait_s: float = 2.0) -> None:
        # keep_s: how long Redis keeps an entry at all, stale or not
        self.load, self.key, self.fresh_s, self.keep_s = load, key, fresh_s, keep_s
        self.cold_wait_s = cold_wait_s
        self._local: dict[str, tuple[T, float]] = {}  # name -> (value, fresh until): Redis away
        # A lock per name, of a fixed few: any name a client sends may be asked for.
        self._flights = [threading.Lock() for _ in range(64)]

    def get(self, name: str) -> T:
        key = self.key(name)
        entry = cache_read(key)
        if entry is UNREADABLE:
            return self._loaded_here(name)
        if entry is not None:
            value, fresh_until = entry  # what refresh wrote: load's value
            if time.time() < fresh_until or not cache_claimed(key, self.fresh_s()):
                return cast(T, value)
            return self.refresh(name)
        if cache_claimed(key, self.fresh_s()):
            return self.refresh(name)
        # Cold: another reader is loading; its value once written, or (it took too
        # long, or failed) one loaded here.
        entry = cache_awaited(key, wait_s=self.cold_wait_s, poll_s=COLD_POLL_S)
        return cast(T, entry[0]) if entry is not None else self._loaded_here(name)

    def refresh(self, name: str) -> T:
        """Load ``name`` and write it back, fresh (this process's own copy, kept
        while Redis is away, goes: a reset is seen at once)."""
        self._local.pop(name, None)
        value = self.load(name)
        cache_write(self.key(name), (value, time.time() + self.fresh_s()), self.keep_s())
        return value

    def _loaded_here(self, name: str) -> T:
        """The value this process loaded within the freshness period, loaded by one
        reader at a time: the others wait for it and answer with it."""
        with self._flights[hash(name) % len(self._flights)]:
            known = self._local.get(name)
            if known is not None and time.time() < known[1]:
                return known[0]
            value = self.load(name)
            self._local[name] = (value, time.time() + self.fresh_s())
            return value
