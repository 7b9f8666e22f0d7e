"""What a process remembers: one bounded, time-limited cache type for every app.

A purchase path that asks Redis or the database the same question on every
request pays a round trip for an answer that changes only with a reset. Each such
answer is held in a ``ProcessMemory``: at most ``size`` entries, each for a
number of seconds counted from *before* the read that produced it, so that a
writer who waits that long after its write (a reset waiting out the memories of
the sale it replaced) knows no process answers from the old value afterwards.

Every memory is cleared when a setting changes (``override_settings``) and by
``forget_everything()``, the one hook a test calls to start from a blank process.
A memory that is full drops its oldest entry: the memories here hold a product's
worth of facts each, so the bound only matters for a catalogue larger than it.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from django.core.signals import setting_changed
from django.dispatch import receiver

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_memories: weakref.WeakSet[ProcessMemory[Any, Any]] = weakref.WeakSet()


class ProcessMemory(Generic[K, V]):
    """``holds`` says what it remembers, for the reader of a dump and of the code;
    ``seconds`` (a callable: settings may change) how long an entry lasts unless
    ``put`` says otherwise. Reads take no lock (a dict's get is atomic); writes take
    one, so that the bound holds under threads."""

    def __init__(self, holds: str, *, seconds: Callable[[], float], size: int = 10_000):
        self.holds = holds
        self._seconds = seconds
        self._size = size
        self._entries: dict[K, tuple[float, V]] = {}  # key -> (until, on the monotonic clock; value)
        self._mutex = threading.Lock()
        _memories.add(self)

    def get(self, key: K) -> V | None:
        """The value, while it lasts; else None."""
        entry = self._entries.get(key)
        if entry is None or time.monotonic() >= entry[0]:
            return None
        return entry[1]

    def last(self, key: K) -> V | None:
        """The last value put, lasting or not (None once dropped): what a reader may
        answer with while another refreshes it, or compare a new read against."""
        entry = self._entries.get(key)
        return None if entry is None else entry[1]

    def until(self, key: K) -> float | None:
        """When the entry stops lasting (``time.monotonic()``); None without one."""
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def put(self, key: K, value: V, *, since: float | None = None, seconds: float | None = None) -> None:
        """Remember ``value`` for ``seconds`` (default: the memory's) from ``since``
        (``time.monotonic()`` before the read that produced it; default now)."""
        start = time.monotonic() if since is None else since
        until = start + (self._seconds() if seconds is None else seconds)
        with self._mutex:
            self._entries.pop(key, None)  # a re-put counts as the newest
            while len(self._entries) >= self._size:
                self._entries.pop(next(iter(self._entries)))
            self._entries[key] = (until, value)

    def pop(self, key: K) -> None:
        with self._mutex:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._mutex:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"<ProcessMemory of {self.holds}: {len(self)} entries>"


def forget_everything() -> None:
    """Clear every memory of this process (the tests' hook)."""
    for memory in list(_memories):
        memory.clear()


@receiver(setting_changed)
def _forget_on_setting_changed(**kwargs: object) -> None:
    forget_everything()
