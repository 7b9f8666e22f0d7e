"""Every scenario, by id. Importing this needs Django
set up: some scenarios use the models."""

from .base import Scenario
from .cache import SCENARIOS as _CACHE
from .clocks import SCENARIOS as _CLOCKS
from .database import SCENARIOS as _DATABASE
from .fairness import SCENARIOS as _FAIRNESS
from .fencing import SCENARIOS as _FENCING
from .instances import SCENARIOS as _INSTANCES
from .more import SCENARIOS as _MORE
from .payments import SCENARIOS as _PAYMENTS
from .redis_locks import SCENARIOS as _REDIS
from .replication import SCENARIOS as _REPLICATION

_ALL = [*_INSTANCES, *_REDIS, *_MORE, *_DATABASE, *_CLOCKS, *_FENCING, *_REPLICATION, *_FAIRNESS, *_CACHE,
        *_PAYMENTS]
CATALOG: dict[str, Scenario] = {s.id: s for s in sorted(_ALL, key=lambda s: int(s.id[1:]))}
