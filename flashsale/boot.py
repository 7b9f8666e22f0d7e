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
"""

import gc

import django


def setup(*, set_prefix: bool = True) -> None:
    """``django.setup``, the collector paused throughout and what it made frozen."""
    gc.disable()
    try:
        django.setup(set_prefix=set_prefix)
    finally:
        gc.freeze()
        gc.enable()
