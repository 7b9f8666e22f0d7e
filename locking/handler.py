"""Builds lock backends from ``settings.LOCKING`` the way Django's cache handler
builds cache backends from ``settings.CACHES``::

    LOCKING = {
        "local": {"BACKEND": "locking.backends.local.LocalLockBackend",
                  "OPTIONS": {"wait_timeout": 5}},
    }

Unlike caches, a backend is shared by every thread of the process: a lock is only
useful if the threads it must exclude see the same one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from .base import BaseLock, BaseLockBackend
from .exceptions import InvalidLockBackendError


class LockHandler:
    def __init__(self) -> None:
        self._backends: dict[str, BaseLockBackend] = {}
        self._mutex = threading.Lock()

    @property
    def settings(self) -> dict[str, dict[str, Any]]:
        return getattr(settings, "LOCKING", {})

    def __getitem__(self, alias: str) -> BaseLockBackend:
        backend = self._backends.get(alias)
        if backend is not None:
            return backend
        with self._mutex:
            if alias not in self._backends:
                self._backends[alias] = self.create_backend(alias)
            return self._backends[alias]

    def create_backend(self, alias: str) -> BaseLockBackend:
        try:
            params = self.settings[alias]
        except KeyError:
            raise InvalidLockBackendError(
                f"settings.LOCKING has no alias {alias!r} (has: {', '.join(self.settings)})"
            ) from None
        try:
            backend_cls = import_string(params["BACKEND"])
        except (KeyError, ImportError) as e:
            raise InvalidLockBackendError(
                f"LOCKING[{alias!r}]: could not import BACKEND: {e}"
            ) from e
        backend: BaseLockBackend = backend_cls(alias, params.get("OPTIONS", {}))
        return backend

    def reset(self) -> None:
        with self._mutex:
            backends, self._backends = self._backends, {}
        for backend in backends.values():
            backend.close()


locks = LockHandler()


def get_lock(name: str, *, alias: str) -> BaseLock:
    """A lock on ``name`` from the backend configured as ``LOCKING[alias]``."""
    return _named(locks[alias].lock(name), alias)


def get_locks(names: Iterable[str], *, alias: str) -> BaseLock:
    """One lock over several names from ``LOCKING[alias]``: de-duplicated and taken
    in sorted order (one name: that name's lock)."""
    return _named(locks[alias].lock_many(names), alias)


def _named(lock: BaseLock, alias: str) -> BaseLock:
    lock.backend_alias = alias  # its metrics' label (locking.metrics)
    return lock


def _reset_on_setting_changed(*, setting: str, **kwargs: object) -> None:
    # So override_settings(LOCKING=...) in a test builds fresh backends.
    if setting == "LOCKING":
        locks.reset()


setting_changed.connect(_reset_on_setting_changed)
