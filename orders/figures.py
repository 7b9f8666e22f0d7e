"""Figures over a sale's measurements, in a plain module (no Django): the audit's
(accepted → confirmed), a race's (its answers' latencies) and the load tools' read the
same percentile from here."""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float | None:
    """The q-th percentile (0-100) of ``values``, nearest-rank; None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]
