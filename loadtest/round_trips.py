"""Redis round trips, counted on the client: one per command, one per pipeline.
The lock benchmark (``benchmarks.redis_locks``) and the herd scenario
(``scenarios.more``, S11) read the same counter."""

from __future__ import annotations

import itertools

import redis

_round_trips = itertools.count()


class CountingConnection(redis.Connection):
    """Counts what the client sends: one per command, one per pipeline."""

    def send_packed_command(self, command, check_health=True):
        next(_round_trips)
        return super().send_packed_command(command, check_health)


def client(url: str) -> redis.Redis:
    """A client whose every round trip is counted."""
    pool = redis.ConnectionPool.from_url(url, connection_class=CountingConnection)
    return redis.Redis(connection_pool=pool)


def round_trips() -> int:
    """The counter: the difference of two readings is the round trips between them
    (plus one, the reading's own step)."""
    return next(_round_trips)
