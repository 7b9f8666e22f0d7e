"""The scenario catalog (shared/SCENARIOS.md): each pitfall from the seed articles,
run broken and fixed, with numbers. ``python -m scenarios --help``."""

from .base import Outcome, Scenario
from .redis_locks import SCENARIOS as _REDIS

CATALOG: dict[str, Scenario] = {s.id: s for s in _REDIS}

__all__ = ["CATALOG", "Outcome", "Scenario"]
