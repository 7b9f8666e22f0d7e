"""The scenario catalog (shared/SCENARIOS.md): each pitfall from the seed articles,
run broken and fixed, with numbers. ``python -m scenarios --help``."""

from .base import Outcome, Scenario
from .more import SCENARIOS as _MORE
from .redis_locks import SCENARIOS as _REDIS

CATALOG: dict[str, Scenario] = {s.id: s for s in sorted([*_REDIS, *_MORE], key=lambda s: int(s.id[1:]))}

__all__ = ["CATALOG", "Outcome", "Scenario"]
