"""What a load balancer and an operator ask an instance.

- ``/livez``: the process answers (no backend asked). A failure means restart it.
- ``/readyz``: the backends this deployment's strategy (``FLASHSALE_STRATEGY``) sells
  with answer: the database, and the locks' server where its lock lives on one
  (Redis, ZooKeeper); under ``gate``, the gate's Redis and the cache's (each sale's
  state), not the database: a gate purchase is decided in Redis and written later by
  the persisters, which wait for the database themselves, so a MariaDB restart does
  not take a gate sale's instances out of their Service (what needs the database
  answers its own 503 meanwhile). A failure means send it no purchases for now. A
  product reset to another strategy whose server is down answers its own purchases
  503 ``unavailable``; the instance stays ready for the rest, as every instance
  shares the same servers.
- ``/healthz``: every backend the stack runs, whichever the strategy uses, for the
  operator and the chaos runner.
- ``/api/ping``: no backend at all, the ceiling a load test compares against.

Each backend is asked on a connection kept for the purpose, with a one-second
timeout, and answers ``ok`` or ``down``: what failed (hosts, ports, users) goes to
the log, never into the body.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import cast

import MySQLdb
import redis
from django.conf import settings
from django.db import connections
from django.http import HttpRequest, JsonResponse
from django.utils.module_loading import import_string
from django_redis import get_redis_connection
from redis.backoff import NoBackoff
from redis.retry import Retry

from common.strategies import strategy_get
from locking.handler import locks

from .sellers import seller_of

logger = logging.getLogger(__name__)

TIMEOUT = 1.0  # seconds a backend has to answer


class _KeptDatabase:
    """One connection to the database per process, for the checks alone: Django's
    own would wait for a frozen server as long as the kernel lets it."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._connection: MySQLdb.Connection | None = None

    def check(self) -> None:
        with self._mutex:
            if self._connection is not None:
                try:
                    self._connection.ping()
                    return
                except MySQLdb.Error:
                    # Broken since the last check: a restart of the server, which may
                    # be back, breaks every process's; a connection made now says.
                    self._connection = None
            try:
                params = connections["default"].get_connection_params()
                wait = max(1, int(TIMEOUT))  # the client's unit is the second
                params.update(connect_timeout=wait, read_timeout=wait, write_timeout=wait)
                self._connection = MySQLdb.connect(**params)
                self._connection.ping()
            except MySQLdb.Error:
                self._connection = None  # the next check connects afresh
                raise


_database = _KeptDatabase()
_gate: redis.Redis | None = None


def _gate_redis() -> None:
    global _gate
    if _gate is None:
        options = dict(socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT, retry=Retry(NoBackoff(), 0))
        if settings.FLASHSALE_GATE_REDIS_CLUSTER:
            # Typed as the Redis it stands in for: a PING, both answer.
            cluster = redis.RedisCluster.from_url(settings.FLASHSALE_GATE_REDIS_URL, **options)
            _gate = cast(redis.Redis, cluster)
        else:
            _gate = redis.Redis.from_url(settings.FLASHSALE_GATE_REDIS_URL, max_connections=4, **options)
    _gate.ping()


def _lock_server(alias: str) -> tuple[str, Callable[[], None]] | None:
    """The server a lock alias lives on, and its check; None for in-process locks and
    for the database (checked anyway)."""
    server = import_string(settings.LOCKING[alias]["BACKEND"]).server
    if server in (None, "database"):
        return None
    return server, lambda: locks[alias].check(TIMEOUT)


def _cache_redis() -> None:
    get_redis_connection("default").ping()  # its own timeouts: a second to connect, two to answer


def _database_check() -> None:
    _database.check()  # the one kept connection, as it is now


# The servers a seller's purchases need, by the names its row gives them, and their checks.
_SERVER_CHECKS: dict[str, Callable[[], None]] = {"redis-gate": _gate_redis, "redis": _cache_redis,
                                                 "database": _database_check}


def _ready_checks() -> dict[str, Callable[[], None]]:
    strategy = strategy_get(settings.FLASHSALE_STRATEGY)
    checks = {}
    for server in seller_of(strategy).needs:
        if server != "lock":
            checks[server] = _SERVER_CHECKS[server]
        elif (lock := _lock_server(strategy.lock)) is not None:
            checks[lock[0]] = lock[1]
    return checks


def _every_check() -> dict[str, Callable[[], None]]:
    checks = {"database": _database.check}
    for alias in settings.LOCKING:
        if (lock := _lock_server(alias)) is not None:
            checks.setdefault(lock[0], lock[1])  # one alias per server is enough
    checks["redis-gate"] = _gate_redis
    return checks


def _documented(checks: dict[str, Callable[[], None]]) -> JsonResponse:
    backends = {}
    for name, check in checks.items():
        try:
            check()
        except Exception as e:  # any failure is the answer, not an error of this view
            logger.warning("health: %s is down: %s: %s", name, type(e).__name__, e)
            backends[name] = "down"
        else:
            backends[name] = "ok"
    body = {"instance": settings.FLASHSALE_INSTANCE, "strategy": settings.FLASHSALE_STRATEGY,
            "backends": backends}
    return JsonResponse(body, status=200 if all(v == "ok" for v in backends.values()) else 503)


def livez(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"instance": settings.FLASHSALE_INSTANCE})


def readyz(request: HttpRequest) -> JsonResponse:
    return _documented(_ready_checks())


def healthz(request: HttpRequest) -> JsonResponse:
    return _documented(_every_check())


# The same answer: a liveness probe and a load test's ceiling both want no backend.
ping = livez
