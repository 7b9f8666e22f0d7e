"""Django's start with the cyclic garbage collector paused.

Starting Django imports every app and builds its settings, models and URLconf: a
great many objects, nearly all of which live as long as the process. The collector
runs every few hundred allocations while they are made, walks them again each time
and frees nothing. ``setup`` pauses it while Django starts, then moves what the start
made into the permanent generation (``gc.freeze``), so that no later collection of a
long-lived process walks it either, and resumes it. The gunicorn master starts
Django this way before it forks its workers (``--preload``), which is the use
``gc.freeze`` is documented for: a collection in a worker no longer writes to those
objects, so the workers keep sharing their pages with the master instead of copying
them. ``python -m benchmarks.start_cost`` measures the start both ways.

Django imports the URLconf at the first request that resolves a path, and a lock
backend, a cache's client, a collector of /metrics, where a request first asks for
it: in each worker, after the fork, where the master had not. ``preload`` imports
them in the master, so the workers share them too.
"""

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import django
from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.urls import get_resolver
from django.utils.module_loading import import_string


@contextmanager
def _paused() -> Iterator[None]:
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def setup(*, set_prefix: bool = True) -> None:
    """``django.setup``, the collector paused throughout and what it made frozen."""
    with _paused():
        django.setup(set_prefix=set_prefix)


def preload() -> None:
    """What the app's requests import on first use, imported now, the collector
    paused as in ``setup``: the URLconf and its views, every lock backend
    ``LOCKING`` names, the collectors /metrics reads and every cache's client.
    Imports and objects only: no connection is made (each thread's cache object is
    its own, and connects when asked)."""
    with _paused():
        get_resolver().url_patterns  # noqa: B018 (imports the URLconf)
        backends = [params["BACKEND"] for params in settings.LOCKING.values()]
        for path in backends + settings.FLASHSALE_METRICS_COLLECTORS:
            import_string(path)
        for alias in settings.CACHES:
            caches[alias]  # noqa: B018 (imports its client)


def setup_for_command() -> None:
    """``setup``, ahead of ``manage.py``'s own, if the settings load. If they do not,
    nothing: Django's command line says what is wrong as it would without this (``help``
    still lists the commands)."""
    with _paused():
        try:
            settings.INSTALLED_APPS  # noqa: B018 (loads them)
        except (ImproperlyConfigured, ImportError):
            return
        django.setup()
