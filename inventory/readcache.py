"""Keeping a hot cache entry from sending every reader to the database at the
moment it expires (cache breakdown, 缓存击穿; scenario S19 runs it beside the plain
cache-aside that does, and beside a rebuild under a lock, ``scenarios.rebuilds``):

- ``LogicalExpiry``: the entry carries the moment it stops being fresh and lives
  much longer. A reader that finds it stale answers with it anyway; one reader per
  freshness period (whose ``SET NX`` of a rebuild flag succeeds) loads the value and
  writes it back. Nobody waits; a reader may get a value up to one period plus one
  load old. The product page's read uses this (``inventory.reads``).

It runs on the shared cache (django-redis). A Redis that is slow or gone costs the
load, never the answer: it falls back to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.core.cache import cache

from common.cache_errors import CACHE_ERRORS, UNREADABLE, cache_read, cache_write


class LogicalExpiry:
    def __init__(self, *, load: Callable[[str], Any], key: Callable[[str], str],
                 fresh_s: Callable[[], float], keep_s: Callable[[], float] = lambda: 300):
        # keep_s: how long Redis keeps an entry at all, stale or not
        self.load, self.key, self.fresh_s, self.keep_s = load, key, fresh_s, keep_s

    def get(self, name: str) -> Any:
        key = self.key(name)
        entry = cache_read(key)
        if entry is UNREADABLE:
            return self.load(name)
        if entry is not None:
            value, fresh_until = entry
            if time.time() < fresh_until or not self._rebuild_claimed(key):
                return value
        return self.refresh(name)

    def refresh(self, name: str) -> Any:
        """Load ``name`` and write it back, fresh."""
        value = self.load(name)
        cache_write(self.key(name), (value, time.time() + self.fresh_s()), self.keep_s())
        return value

    def _rebuild_claimed(self, key: str) -> bool:
        """Whether this reader is the one to rebuild a stale entry: one per period;
        the flag lives as long as the period, so a rebuilder that died frees it."""
        try:
            return cache.add(f"{key}:rebuild", 1, timeout=self.fresh_s())
        except CACHE_ERRORS:
            return True
