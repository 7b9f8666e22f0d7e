"""What the Redis backends share: one client (connection pool) per backend and the
Lua scripts, read once from the ``.lua`` files beside this module."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import redis
import redis.sentinel
from redis.backoff import NoBackoff
from redis.commands.core import Script
from redis.connection import parse_url
from redis.retry import Retry

from ...base import BaseLockBackend

# What redis-py raises when the server is down, refuses, or stops answering.
UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)

LUA_DIR = Path(__file__).resolve().parent


# Lua scripts cannot include one another: these get their helpers prepended.
PRELUDES = {
    "setnx_acquire": ("fence",),
    "redisson_acquire": ("fence", "held_by"),
    "redisson_release": ("latch", "held_by", "wake_one"),
    "redisson_renew": ("held_by",),
    "redisson_force_release": ("wake_one",),
    "redisson_wake": ("wake_one",),
    "redisson_fair_acquire": ("fence", "take_hold", "clock", "fair_queue"),
    "redisson_fair_release": ("latch", "give_back", "clock", "fair_queue"),
    "redisson_fair_leave": ("clock", "fair_queue"),
    "redisson_fair_force_release": ("clock", "fair_queue"),
    "rw_read_acquire": ("clock", "rw_holds"),
    "rw_write_acquire": ("clock", "rw_holds"),
    "rw_release": ("latch", "clock", "rw_holds"),
    "rw_renew": ("clock", "rw_holds"),
}


@cache
def lua(name: str) -> str:
    parts = [*PRELUDES.get(name, ()), name]
    return "\n".join((LUA_DIR / f"{part}.lua").read_text() for part in parts)


# A script's reply, as the Lua above returns it: a number or nil, or a pair of them.

def reply_number(reply: Any) -> int | None:
    return None if reply is None else int(reply)


def reply_pair(reply: Any) -> tuple[int, int | None]:
    """An acquire's reply: (1, its fencing token) or (0, the lock's TTL)."""
    got, value = reply
    return int(got), reply_number(value)


class RedisLockBackend(BaseLockBackend):
    """
    OPTIONS: ``url`` (redis://host:port/db), ``key_prefix`` (default
    ``"lock:"``), ``connection_class`` (redis-py's by default; a benchmark passes
    one that counts round trips), ``max_connections`` (512: redis-py's own 100
    refuses the 101st thread at once instead of letting it wait), ``socket_timeout``
    (5 s: how long a reply may take before the server counts as unreachable), plus
    each lock class's own options.

    Behind Sentinel: ``sentinels`` (``[(host, port), ...]``) and ``service`` (the
    master's name there); each new connection goes to the master the sentinels
    name, and ``url`` gives only the database number.
    """

    scripts: tuple[str, ...] = ()
    server = "redis"

    def __init__(self, alias: str, options: dict[str, Any]):
        super().__init__(alias, options)
        url = self.options.pop("url", "redis://127.0.0.1:6379/0")
        self._url = url
        self._checker: redis.Redis | None = None
        self.key_prefix = self.options.pop("key_prefix", "lock:")
        connection_class = self.options.pop("connection_class", redis.Connection)
        max_connections = self.options.pop("max_connections", 512)
        # redis-py's pool notices a fork and reconnects in the child, so one client
        # per backend serves every gunicorn worker forked after it.
        # No retries of its own (redis-py's default retries a command whose reply was
        # lost): a lock script that ran before its reply was lost must not run again
        # behind our back, or a reentrant lock counts the same acquisition twice and
        # is never let go. Each lock decides what a lost reply means (a release asks
        # its latch; an acquire is reported unavailable, its lease frees it).
        sentinels = self.options.pop("sentinels", None)
        service = self.options.pop("service", "mymaster")
        socket_timeout = float(self.options.pop("socket_timeout", 5.0))
        connection = dict(socket_timeout=socket_timeout, socket_connect_timeout=min(2.0, socket_timeout),
                          health_check_interval=30,
                          retry=Retry(NoBackoff(), 0), max_connections=max_connections)
        self._sentinel: redis.sentinel.Sentinel | None = None
        if sentinels:
            asking = {"socket_timeout": 1, "socket_connect_timeout": 1}
            self._sentinel = redis.sentinel.Sentinel([tuple(s) for s in sentinels], sentinel_kwargs=asking)
            self._service = service
            self._db = parse_url(url).get("db", 0)
            self.client = self._sentinel.master_for(service, db=self._db, **connection)
        else:
            pool = redis.ConnectionPool.from_url(url, connection_class=connection_class, **connection)
            self.client = redis.Redis(connection_pool=pool)
        # register_script runs EVALSHA and falls back to loading the script (SCRIPT
        # LOAD) when the server does not know it yet, e.g. after a restart.
        self.script: dict[str, Script] = {name: self.client.register_script(lua(name))
                                          for name in self.scripts}

    def check(self, timeout: float) -> None:
        # A client of its own, one connection kept: the locks' pool waits 5 s for a
        # reply, far longer than a load balancer waits for a readiness answer.
        if self._checker is None:
            checker = dict(socket_timeout=timeout, socket_connect_timeout=timeout,
                           retry=Retry(NoBackoff(), 0), max_connections=1)
            if self._sentinel:
                self._checker = self._sentinel.master_for(self._service, db=self._db, **checker)
            else:
                self._checker = redis.Redis.from_url(self._url, **checker)
        self._checker.ping()

    def close(self) -> None:
        self.client.close()
        if self._checker is not None:
            self._checker.close()
