"""When each buyer of an open crowd arrives: a schedule fixed before the run, which
no answer can slow down (the client that waits for answers before it sends more is
closed, and hides a server's stall from its own figures: coordinated omission).

Two shapes, as seconds after the crowd's start, for buyer ``k`` of ``n``:

- steady: ``rate`` buyers a second, ``k / rate``;
- an opening: the rate climbs in a straight line to its peak at one second, then
  halves every ``half_life`` seconds; the peak is what puts ``n`` buyers under that
  curve. Buyer ``k`` arrives at the ``(k + 0.5) / n`` quantile of it.
"""

from __future__ import annotations

import math

RAMP_S = 1.0  # the opening's climb to its peak


def opening_peak(n: int, half_life: float) -> float:
    """Buyers a second at the opening's peak, for ``n`` buyers in all: the climb holds
    ``peak * RAMP_S / 2`` of them, the tail ``peak * half_life / ln 2``."""
    return n / (RAMP_S / 2 + half_life / math.log(2))


def arrival_offset(k: int, n: int, *, rate: float = 0.0, half_life: float = 1.0) -> float:
    """Seconds from the crowd's start to buyer ``k``'s arrival (``0 <= k < n``): steady
    at ``rate`` a second, or with no rate, in the shape of an opening."""
    if not 0 <= k < n:
        raise ValueError(f"buyer {k} of {n}")
    if rate > 0:
        return k / rate
    peak = opening_peak(n, half_life)
    before = k + 0.5  # buyers arrived by this one's quantile
    climb = peak * RAMP_S / 2
    if before <= climb:  # under the climb: peak / RAMP_S * t**2 / 2 buyers by t
        return math.sqrt(2 * before * RAMP_S / peak)
    tail = peak * half_life / math.log(2)  # every buyer the tail holds, to infinity
    return RAMP_S - half_life * math.log2(1 - (before - climb) / tail)
