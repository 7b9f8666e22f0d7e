"""The gate's Redis: its client, the keys of a product's sale, the order ids' layout
and the Lua scripts (``lua/``), for the rest of the room."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlparse

import redis
import redis.sentinel
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from redis.backoff import NoBackoff
from redis.retry import Retry

from common.scripts import script_on, scripts_forget

# Ids: the sale's block above 25 bits, twice the units sold before below (a reset
# takes at most 10,000,000 units, under 2**24). Below 2**53 for blocks under 2**28,
# so a browser's JSON numbers hold them exactly.
ID_BLOCK_SHIFT = 25
GROUP = "persisters"  # the consumer group every persister reads the streams in
# The persisters' list: sku -> its sale's id, for every sale whose stream may still
# have something to write. A finished sale leaves it (gate_unlist_finished), so a
# persister's round costs the live sales, not every sale ever held. (No hash tag: it
# is never in a script with a product's keys.)
SALES = "gate:sales"
_OLD_LIST = "gate:skus"  # its earlier form: a set of skus (gate_list_upgrade)


class GateKeys(NamedTuple):
    sale: str  # hash: stock, loaded, base, accepted (units), opened, starts and ends (epoch ms, "": none)
    keys: str  # hash: Idempotency-Key -> "fingerprint order_id remaining quantity instance"
    orders: str  # hash: order id -> its stream entry id ("dead <id>" once dead-lettered)
    bought: str  # hash: user -> units bought (the per-user limit)
    stream: str  # the order intents, read by the persisters' group
    dead: str  # the intents the persisters could not write, with the reason
    # order id -> "returned" (its units back in stock: it expired unpaid) or "retaken"
    # (paid late: its units out again, or never given back); payments.expiry
    returns: str


def gate_keys(sku: str) -> GateKeys:
    # The sku is escaped so that no "{" or "}" of its own moves the hash tag.
    tag = "{" + sku.replace("%", "%25").replace("{", "%7B").replace("}", "%7D") + "}"
    return GateKeys(*(f"gate:{tag}{suffix}" for suffix in ("", ":keys", ":orders", ":bought", ":stream",
                                                          ":dead", ":returns")))


# The scripts, read once from lua/ (each file says its KEYS, its ARGV and its reply).
LUA_DIR = Path(__file__).resolve().parent / "lua"


def lua_source(name: str) -> str:
    return (LUA_DIR / f"{name}.lua").read_text()


_SELL = lua_source("sell")  # a purchase
_OPEN = lua_source("open")  # a sale loaded
_FINISHED = lua_source("finished")  # whether a sale's stream is done
_UNLIST = lua_source("unlist")  # a finished sale off the persisters' list
_CLOSE = lua_source("close")  # a sale dropped
_SOLD_OUT = lua_source("sold_out")  # what a process remembers of a sold-out sale
_RETURN = lua_source("return")  # an expired order's units back in stock, once
_RETAKE = lua_source("retake")  # a late payment's units out again, once

_client: redis.Redis | None = None
_client_mutex = threading.Lock()


class _Identified:
    """A connection that learns, as it connects, which Redis server it reached: its
    run id, new at every start of a server. A sale remembers the primary that holds
    it (``primary`` in its hash); a script run on another server (a replica promoted,
    a primary restarted) is told so (``sell.lua``) and sells nothing until the sale
    is reconciled (``orders.gate.reconcile``)."""

    server_id = ""

    def on_connect_check_health(self, check_health: bool = True):
        super().on_connect_check_health(check_health)
        self.send_command("INFO", "server", check_health=False)
        info = self.read_response()
        info = info.decode() if isinstance(info, bytes) else info
        self.server_id = next((line.partition(":")[2].strip() for line in info.splitlines()
                               if line.startswith("run_id:")), "")


class IdentifiedConnection(_Identified, redis.Connection):
    pass


class _SentinelConnection(_Identified, redis.sentinel.SentinelManagedConnection):
    pass


def gate_redis() -> redis.Redis:
    """The gate's Redis client, one per process. It never retries a command by
    itself: a script whose reply was lost may have run, and running it again would
    sell a second unit to a buyer without a key."""
    global _client
    with _client_mutex:
        if _client is None:
            # Named after the process, so CLIENT LIST shows who is connected (the
            # stack's readiness probe of a persister looks for its name).
            options = dict(retry=Retry(NoBackoff(), 0), socket_connect_timeout=1, socket_timeout=2,
                           decode_responses=True, client_name=settings.FLASHSALE_INSTANCE)
            url = settings.FLASHSALE_GATE_REDIS_URL
            if settings.FLASHSALE_GATE_REDIS_CLUSTER:
                _client = redis.RedisCluster.from_url(url, connection_class=IdentifiedConnection, **options)
            elif settings.FLASHSALE_GATE_REDIS_SENTINELS:
                parsed = urlparse(url)
                sentinels = redis.sentinel.Sentinel(
                    settings.FLASHSALE_GATE_REDIS_SENTINELS,
                    sentinel_kwargs=dict(socket_timeout=1, socket_connect_timeout=1))
                _client = sentinels.master_for(
                    settings.FLASHSALE_GATE_REDIS_SENTINEL_SERVICE, db=int(parsed.path.strip("/") or 0),
                    password=parsed.password, connection_class=_SentinelConnection, **options)
            else:
                _client = redis.Redis.from_url(url, connection_class=IdentifiedConnection, **options)
        return _client


@receiver(setting_changed)
def _forget_client(*, setting, **kwargs):
    global _client
    if setting.startswith("FLASHSALE_GATE_REDIS"):
        with _client_mutex:
            _client = None
            scripts_forget()


def _script(source: str):
    """The script's handle on the current client, made once (it hashes the source)."""
    return script_on(gate_redis(), source)


def _unreachable(e: redis.RedisError) -> bool:
    """Whether ``e`` says the command never reached Redis (the connection could not
    be made), as opposed to a reply lost after it was sent."""
    if isinstance(e, redis.sentinel.MasterNotFoundError):
        return True  # no sentinel named a master: no connection was made
    return isinstance(e, redis.ConnectionError | redis.TimeoutError) and "connecting to" in str(e)
