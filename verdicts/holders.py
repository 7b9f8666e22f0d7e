"""Who holds a lesson's lock, and which Redis is primary, watched from outside the
instances: the lessons on leases strike a holder inside its critical section
(``verdicts.links``), and the failovers' heal and tests ask which replica was promoted."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast

import redis

from stack.hosted import HostedApps
from stack.hosted_redis import (
    GATE_SENTINEL_SERVICE,
    REDIS_GATE_REPLICA_PORT,
    SENTINEL_SERVICE,
)

HELD_A_WHILE = 0.04  # seconds a holder keeps the lock before the cut: past its read


def held_a_while(holder: Callable[[], object | None], held: float = HELD_A_WHILE) -> object | None:
    """Until ``holder()`` (who holds the lock, None when nobody does) names the same
    holder twice ``held`` seconds apart: past its read of the stock, inside its
    critical section. Returns that holder; None after 5 s without one (the cut then
    strikes anyway)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        first = holder()
        if first is not None:
            time.sleep(held)
            if holder() == first:
                return first
        time.sleep(0.005)
    return None


def setnx_holder(client: redis.Redis) -> bytes | None:
    """The setnx lock's holder token, or None: the lock is a key holding its
    holder's token, beside the stock row's fence counter. A look the Redis does not
    answer within the client's timeout and retries (a loaded machine) sees nobody:
    the lessons strike anyway, as they do when no holder shows, rather than not at
    all."""
    try:
        keys = [k for k in client.scan_iter(match="flashsale:lock:stock:*") if not k.endswith(b":fence")]
        return cast(bytes | None, client.get(keys[0])) if keys else None  # a client that does not decode
    except redis.RedisError:
        return None


def someone_asks(client: redis.Redis) -> bool:
    """Whether a SET reaches the locks' Redis within 30 ms: a waiter polls every 20 ms
    (a new purchase claims its key with one, then waits as well)."""
    def sets() -> int:
        return client.info("commandstats").get("cmdstat_set", {}).get("calls", 0)

    try:
        before = sets()
        time.sleep(0.03)
        return sets() > before
    except redis.RedisError:  # unanswered in time: nobody seen, as in ``setnx_holder``
        return False


def sentinel_master(hosted: HostedApps, service: str = SENTINEL_SERVICE) -> str | None:
    """The name of the host Sentinel names ``service``'s master, or None while it does
    not answer (a look during a failover, on a loaded machine)."""
    try:
        return hosted.master(service).name
    except redis.RedisError:
        return None


def lock_failed_over(hosted: HostedApps) -> bool:
    """Whether Sentinel names the locks' replica, ``redis2``, their master (the lesson
    begins on ``redis``); not while it does not answer."""
    return sentinel_master(hosted) == "redis2"


def promoted(hosted: HostedApps, cluster: bool) -> list[str]:
    """The gate's servers made replicas that are primaries now. A server that does not
    answer within a second (on a host cut off) is not counted."""
    def primary(host: str, port: int) -> bool:
        try:
            with redis.Redis(host=host, port=port, socket_timeout=1, socket_connect_timeout=1,
                             decode_responses=True) as node:
                return node.info("replication")["role"] == "master"
        except redis.RedisError:
            return False

    if not cluster:
        return ["redis2"] if sentinel_master(hosted, GATE_SENTINEL_SERVICE) == "redis2" else []
    return [host.name for host in hosted.redis_servers.gate_started_on()
            if primary(host.address, REDIS_GATE_REPLICA_PORT)]
