"""Whether this code's schema is in place, for a process about to start (the apps'
init container: ``manage.py schema_ready``).

The database answers, when it can: every migration this code has is applied, or not.
A deployment that sells through the gate needs the database for neither the sale
nor its start, so a pod of it that finds the database away asks the gate's Redis
instead: each answer "applied" under the gate leaves there a mark of the migrations it
covered, and a pod whose code has exactly those starts. A pod of a release whose
migrations no answer has covered yet waits, as it would for the database.
"""

from __future__ import annotations

import enum
import hashlib

import redis
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

from .store import gate_redis

MARK = "gate:schema"  # the digest of the migrations the database last had applied


class Schema(enum.Enum):
    APPLIED = "every migration of this code is applied"
    PENDING = "the database lacks migrations of this code"
    MARKED = "the database is away; the gate's Redis marks this code's migrations applied"
    UNKNOWN = "the database is away, and nothing vouches for this code's migrations"

    @property
    def ready(self) -> bool:
        return self in (Schema.APPLIED, Schema.MARKED)


def migrations_digest() -> str:
    """This code's migrations, as the latest of each app, read from disk alone."""
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    leaves = sorted(f"{app}.{name}" for app, name in graph.leaf_nodes())
    return hashlib.sha256("\n".join(leaves).encode()).hexdigest()[:16]


def schema_state(*, gated: bool) -> Schema:
    """What the database says of this code's migrations; ``gated`` (the deployment
    sells through the gate), with the gate's mark written or, the database away, read."""
    digest = migrations_digest()
    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError:
        if not gated:
            return Schema.UNKNOWN
        try:
            return Schema.MARKED if gate_redis().get(MARK) == digest else Schema.UNKNOWN
        except redis.RedisError:
            return Schema.UNKNOWN
    if pending:
        return Schema.PENDING
    if gated:
        try:
            gate_redis().set(MARK, digest)
        except redis.RedisError:
            pass  # the answer stands; the next pod's leaves the mark
    return Schema.APPLIED
