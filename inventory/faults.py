"""Fault injection in the critical section, beside nothing else: the hooks a test or a
scenario uses to pause a lock holder at a chosen point (``stalled``), and the delay
that stands for a real critical section's business work (``section_delay``). The
deduction calls each in one line."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.conf import settings

_stalls = threading.local()


@contextmanager
def stalled(pause: Callable[[str], object]) -> Iterator[None]:
    """Fault injection: inside the block, this thread's critical sections call
    ``pause(point)`` at each point where a GC pause or a stopped VM could strike a
    lock holder: ``"start"`` (the lock is held, the stock not yet touched) and
    ``"read"`` (the stock was read, not yet written). Scenario S17 uses it."""
    _stalls.pause = pause
    try:
        yield
    finally:
        _stalls.pause = None


def stall_point(point: str) -> None:
    """Where a critical section may be paused (``stalled``)."""
    pause = getattr(_stalls, "pause", None)
    if pause is not None:
        pause(point)


def section_delay() -> None:
    # Stands for the business work a real critical section does (pricing, coupons,
    # calls out); without it two cores rarely interleave and oversell hides.
    delay_ms = settings.FLASHSALE_SECTION_DELAY_MS
    if delay_ms > 0:
        time.sleep(delay_ms / 1000)
