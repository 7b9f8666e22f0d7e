"""The gate's Redis client, one per process: the server that holds the gate's sales
(``orders.gate``) and every sale's waiting room (``waitingroom``), so that a gate
purchase spends its admission in the script that takes the stock. A sale's keys and
its room's share a hash tag (``sku_tag``): one Cluster slot, one script."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import cast
from urllib.parse import urlparse

import redis
import redis.sentinel
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from redis.backoff import NoBackoff
from redis.retry import Retry

from common.scripts import scripts_forget

_client: redis.Redis | None = None
_client_mutex = threading.Lock()


class Identified(redis.connection.AbstractConnection):
    """A connection that learns, as it connects, which Redis server it reached: its
    run id, new at every start of a server. A sale remembers the primary that holds
    it (``primary`` in its hash); a script run on another server (a replica promoted,
    a primary restarted) is told so (``sell.lua``) and sells nothing until the sale
    is reconciled (``orders.gate.reconcile``)."""

    server_id = ""

    def on_connect_check_health(self, check_health: bool = True) -> None:
        super().on_connect_check_health(check_health)
        self.send_command("INFO", "server", check_health=False)
        info = self.read_response()
        info = info.decode() if isinstance(info, bytes) else info
        self.server_id = next((line.partition(":")[2].strip() for line in info.splitlines()
                               if line.startswith("run_id:")), "")


class IdentifiedConnection(Identified, redis.Connection):
    pass


class _SentinelConnection(Identified, redis.sentinel.SentinelManagedConnection):
    pass


def gate_redis() -> redis.Redis:
    """The gate's Redis client, one per process. It never retries a command by
    itself: a script whose reply was lost may have run, and running it again would
    sell a second unit to a buyer without a key."""
    global _client
    with _client_mutex:
        if _client is None:
            _client = _connected()
        return _client


def _connected() -> redis.Redis:
    # Named after the process, so CLIENT LIST shows who is connected (the stack's
    # readiness probe of a persister looks for its name).
    options = dict(retry=Retry(NoBackoff(), 0), socket_connect_timeout=1, socket_timeout=2,
                   decode_responses=True, client_name=settings.FLASHSALE_INSTANCE)
    url = settings.FLASHSALE_GATE_REDIS_URL
    if settings.FLASHSALE_GATE_REDIS_CLUSTER:
        # Typed as the Redis it stands in for: what the gate sends, both answer.
        return cast(redis.Redis, redis.RedisCluster.from_url(url, connection_class=IdentifiedConnection,
                                                             **options))
    if settings.FLASHSALE_GATE_REDIS_SENTINELS:
        parsed = urlparse(url)
        sentinels = redis.sentinel.Sentinel(settings.FLASHSALE_GATE_REDIS_SENTINELS,
                                            sentinel_kwargs=dict(socket_timeout=1, socket_connect_timeout=1))
        master: redis.Redis = sentinels.master_for(
            settings.FLASHSALE_GATE_REDIS_SENTINEL_SERVICE, db=int(parsed.path.strip("/") or 0),
            password=parsed.password, connection_class=_SentinelConnection, **options)
        return master
    return redis.Redis.from_url(url, connection_class=IdentifiedConnection, **options)


@receiver(setting_changed)
def _forget_client(*, setting: str, **kwargs: object) -> None:
    global _client
    if setting.startswith("FLASHSALE_GATE_REDIS"):
        with _client_mutex:
            _client = None
            scripts_forget()


# Its client decodes every reply (``decode_responses``), which redis-py's annotations
# cannot say: they give each reply as bytes or str. These name what the reply is.

def text(reply: bytes | str) -> str:
    """A reply of the gate's Redis, which is text."""
    return cast(str, reply)


def fields(reply: Mapping[bytes | str, bytes | str] | None) -> dict[str, str] | None:
    """A hash or a stream entry's fields, read from the gate's Redis (None: gone)."""
    return cast(dict[str, str] | None, reply)


# A stream's entries: (id, fields), where an entry deleted from the stream since it
# was delivered to a consumer has no fields.
Entries = list[tuple[str, dict[str, str] | None]]


def stream_entries(reply: object) -> Entries:
    """A stream's entries, read from the gate's Redis (XRANGE's, XAUTOCLAIM's; none: [])."""
    return cast(Entries, reply or [])


def sku_tag(sku: str) -> str:
    """The hash tag of ``sku``'s keys, escaped so that no "{" or "}" of its own moves it."""
    return "{" + sku.replace("%", "%25").replace("{", "%7B").replace("}", "%7D") + "}"


def unreachable(e: redis.RedisError) -> bool:
    """Whether ``e`` says the command never reached Redis (the connection could not
    be made), as opposed to a reply lost after it was sent."""
    if isinstance(e, redis.sentinel.MasterNotFoundError):
        return True  # no sentinel named a master: no connection was made
    return isinstance(e, redis.ConnectionError | redis.TimeoutError) and "connecting to" in str(e)
