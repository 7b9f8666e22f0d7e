"""The lease watchdog: while a lock taken without an explicit lease is held in this
process, renew it every ``timeout / 3``; stop at the final release.

One thread per process renews every watched lock. If the process dies (even by
SIGKILL) nothing renews, and the lock expires within one ``timeout``. If a renewal
finds the lock no longer held by its holder (it expired during a long stall, or was
force-released), the entry is dropped and a warning logged: that holder has lost
mutual exclusion and must not assume otherwise.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import redis
from redis.commands.core import Script

from ... import metrics

logger = logging.getLogger(__name__)


class Watchdog:
    def __init__(self, renew: Script, timeout_ms: int, *, backend: str):
        self.renew = renew
        self.timeout_ms = int(timeout_ms)
        self.backend = backend  # the settings.LOCKING alias: its metrics' label
        self._mutex = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        # Also after a fork: the parent's holders and renewal thread are not ours.
        self._pid = os.getpid()
        # (key, holder) -> the renewal script's keys and its arguments after the lease
        # and holder (a read-write lock renews two keys, and may wake waiters).
        self._watched: dict[tuple[str, str], tuple[list[str], tuple[Any, ...]]] = {}
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    def watch(self, key: str, holder: str, *, keys: list[str] | None = None,
              args: tuple[Any, ...] = ()) -> None:
        """Renew ``key`` for ``holder``; the script gets ``keys`` (default ``[key]``)
        and, after the lease and the holder, ``args``."""
        with self._mutex:
            if self._pid != os.getpid():
                self._reset()
            self._watched[(key, holder)] = (keys or [key], args)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, args=(self._stopped,),
                                                name="lock-watchdog", daemon=True)
                self._thread.start()

    def unwatch(self, key: str, holder: str | None = None) -> None:
        """Stop renewing ``key`` for ``holder`` (every holder when None)."""
        with self._mutex:
            self._watched = {(k, h): how for (k, h), how in self._watched.items()
                             if not (k == key and (holder is None or h == holder))}

    def watching(self, key: str, holder: str) -> bool:
        with self._mutex:
            return (key, holder) in self._watched

    def stop(self) -> None:
        self._stopped.set()

    def _run(self, stopped: threading.Event) -> None:
        interval = self.timeout_ms / 3 / 1000
        while not stopped.wait(interval):
            with self._mutex:
                watched = list(self._watched.items())
            for (key, holder), (keys, args) in watched:
                try:
                    renewed = self.renew(keys=keys, args=[self.timeout_ms, holder, *args])
                except redis.RedisError as e:  # try again next tick, within the lease
                    logger.warning("lease renewal of %s failed: %s", key, e)
                    metrics.count(metrics.RENEWALS, self.backend, "failed")
                    continue
                if not renewed:
                    logger.warning("lock %s is no longer held by %s: lease lost", key, holder)
                    metrics.count(metrics.RENEWALS, self.backend, "lost")
                    self.unwatch(key, holder)
                else:
                    metrics.count(metrics.RENEWALS, self.backend, "renewed")
