"""The gate: a sale decided in Redis, written to the database afterwards.

The reset loads the product's stock into Redis (``gate_open``). From then on a
purchase is one Lua script, atomic on the Redis server: it answers a replayed
Idempotency-Key with its first answer, checks the per-user limit and the stock,
takes the units, and appends the order intent to the product's stream with XADD.
Either all of that happens or none: there is no moment in which the stock was taken
and the intent is missing. The buyer hears 201 ``accepted`` with the order's id; the
persisters (``orders.gate.persister``) write the stream to MySQL in batches, and the
order turns ``confirmed``.

Every key of one product carries the same hash tag, ``{<sku>}``, so on a Redis
Cluster they live in one slot and one script may touch them all.

Order ids are known before the row exists: the sale's block (a ``GateSale`` row,
allocated by MySQL at the reset) and the units sold before this order make the id,
``block * 2**25 + 2 * sold_before``. Even, so never one of MySQL's own (odd, see
the settings), and one per unit sold, so never reused within a sale.

Once a sale's stock is 0 it stays 0 until a reset opens another, and so does its set
of keys: each process then remembers the sale sold out, with those keys, and
answers a purchase whose key is not among them 409 without the script (the
seckill peers' local "sold out" map, made to keep replays true). The memory lasts
``FLASHSALE_GATE_SOLD_OUT_MEMORY`` from before the read it stands on; a reset of a
sold-out sale answers only once that long has passed since it closed the sale, so
after the reset no process answers from the old one.

What this trades away: an accepted order is as durable as Redis is (its AOF), not
as MySQL is; see the README's "The gate".
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import redis
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from redis.backoff import NoBackoff
from redis.retry import Retry

from flashsale.errors import (
    IdempotencyConflict,
    LimitReached,
    OutcomeUnknown,
    SoldOut,
    Unavailable,
)
from inventory.models import Product
from inventory.selectors import flows_after

from ..idempotency import request_fingerprint
from ..models import GateSale, Order
from ..window import SaleWindow, ended, not_started

logger = logging.getLogger(__name__)

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


def gate_keys(sku: str) -> GateKeys:
    # The sku is escaped so that no "{" or "}" of its own moves the hash tag.
    tag = "{" + sku.replace("%", "%25").replace("{", "%7B").replace("}", "%7D") + "}"
    return GateKeys(*(f"gate:{tag}{suffix}" for suffix in ("", ":keys", ":orders", ":bought", ":stream",
                                                          ":dead")))


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

_client: redis.Redis | None = None
_client_mutex = threading.Lock()


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
            if settings.FLASHSALE_GATE_REDIS_CLUSTER:
                _client = redis.RedisCluster.from_url(settings.FLASHSALE_GATE_REDIS_URL, **options)
            else:
                _client = redis.Redis.from_url(settings.FLASHSALE_GATE_REDIS_URL, **options)
        return _client


@receiver(setting_changed)
def _forget_client(*, setting, **kwargs):
    global _client
    if setting.startswith("FLASHSALE_GATE_REDIS"):
        with _client_mutex:
            _client = None
            _scripts.clear()
    if setting.startswith(("FLASHSALE_GATE", "FLASHSALE_SOLDOUT")):
        _sold_out.clear()


_scripts: dict[tuple[int, str], object] = {}


def _script(source: str):
    """The script's handle on the current client, made once (it hashes the source)."""
    client = gate_redis()
    handle = _scripts.get((id(client), source))
    if handle is None:
        handle = _scripts[(id(client), source)] = client.register_script(source)
    return handle


_threads = threading.local()


def _sell(*, keys: GateKeys, args: list) -> list:
    """The sale's script, on this thread's own connection to the gate's Redis: the
    purchase's one round trip without the client's pool, its retry wrapper and its
    script object on the way, which were a large share of an accepted purchase's CPU
    (``python -m benchmarks.purchase_cpu``). Run as the client runs a script: by
    its hash, loaded first if Redis does not know it. On a Redis Cluster its client
    runs it, in the product's slot."""
    script = _script(_SELL)
    client = script.registered_client  # the process's client, as gate_redis() has it
    if settings.FLASHSALE_GATE_REDIS_CLUSTER:
        return script(keys=list(keys), args=args)
    connection = getattr(_threads, "connection", None)
    if connection is None or _threads.client is not client:
        connection = client.connection_pool.make_connection()
        _threads.connection, _threads.client = connection, client
    _fresh(connection)
    try:
        try:
            connection.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
            return connection.read_response()
        except redis.exceptions.NoScriptError:  # it ran nothing
            client.script_load(_SELL)
            connection.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
            return connection.read_response()
    except BaseException:
        connection.disconnect()  # whatever it was in the middle of: the next purchase connects anew
        raise


def _fresh(connection: redis.Connection) -> None:
    """Drop the connection if Redis closed it since its last command (a restart): a
    command sent on it would fail with a lost reply, "outcome unknown", though it
    never ran. The pool checks its connections the same way before it lends one."""
    try:
        stale = connection.can_read()  # data or EOF waiting before a command is sent
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        stale = True
    if stale:
        connection.disconnect()  # the command connects anew (or says Redis cannot be reached)


def _unreachable(e: redis.RedisError) -> bool:
    """Whether ``e`` says the command never reached Redis (the connection could not
    be made), as opposed to a reply lost after it was sent."""
    return isinstance(e, redis.ConnectionError | redis.TimeoutError) and "connecting to" in str(e)


# --- opening a sale --------------------------------------------------------------------


def gate_open(*, sale: GateSale, window: SaleWindow, keys: dict[str, str] | None = None,
              bought: dict[str, int] | None = None) -> None:
    """Load ``sale`` (its product's stock, its id block, its ``window``) into Redis, with the replay
    records and per-user counts of orders the product already has (a warm-up after
    Redis lost the sale: ``keys`` and ``bought``), and put the sale on the
    persisters' list. Whatever Redis held of the product before is dropped."""
    k = gate_keys(sale.product.sku)
    client = gate_redis()
    try:
        client.delete(k.keys, k.bought)
        for chunk in _chunks(keys or {}):
            client.hset(k.keys, mapping=chunk)
        for chunk in _chunks(bought or {}):
            client.hset(k.bought, mapping=chunk)
        _script(_OPEN)(keys=list(k), args=[sale.loaded_stock, sale.pk << ID_BLOCK_SHIFT, time.time(), sale.pk,
                                           GROUP, _ms(window.starts_at), _ms(window.ends_at)])
        client.hset(SALES, sale.product.sku, sale.pk)
    except redis.RedisError as e:
        raise Unavailable(f"the gate's Redis cannot be reached; the sale of {sale.product.sku} "
                          "is not open", backend="redis") from e


def gate_close(*, sku: str, required: bool) -> float:
    """Stop selling ``sku`` from Redis and drop its sale there (every reset does
    this first).

    :returns: until when (``time.monotonic()``) a process may still answer from its
        memory that the closed sale sold out: the caller's answer waits for it
        (``gate_settle``), so that none does after it. Now, if the sale was not sold
        out (no process remembers it so).
    :raises Unavailable: Redis cannot be reached and the close is ``required`` (the
        product has, or is to have, a gate sale: left in Redis, it would go on
        accepting orders no persister may write). Otherwise that is only logged.
    """
    try:
        stock = _script(_CLOSE)(keys=list(gate_keys(sku)))
        gate_redis().hdel(SALES, sku)
    except redis.RedisError as e:
        if required:
            raise Unavailable(f"the gate's Redis cannot be reached to close the sale of {sku}; "
                              "nothing was reset", backend="redis") from e
        logger.warning("could not close the gate of %s (it has no gate sale): %s", sku, e)
        return time.monotonic()
    _sold_out.pop(sku, None)
    closed = time.monotonic()
    return closed + settings.FLASHSALE_GATE_SOLD_OUT_MEMORY if stock == "0" else closed


def gate_listed() -> list[str]:
    """The products on the persisters' list, in order."""
    return sorted(gate_redis().hkeys(SALES))


def gate_list_upgrade() -> int:
    """Move the products on the list's earlier form (a set of skus, every sale ever
    opened) onto the list, each with the sale Redis holds of it, so that a stack
    upgraded with sales open keeps writing them; a reset since listed its own (kept).
    Returns how many were moved.

    :raises redis.RedisError: Redis cannot be reached.
    """
    client = gate_redis()
    moved = 0
    for sku in client.smembers(_OLD_LIST):
        sale = client.hget(gate_keys(sku).sale, "block")
        if sale is not None:
            moved += client.hsetnx(SALES, sku, sale)
    client.delete(_OLD_LIST)
    return moved


def gate_unlist_finished(*, sku: str) -> bool:
    """Take ``sku`` off the persisters' list if its sale is finished: sold out or
    ended, and every order in its stream written and acknowledged. Its keys stay
    (the audit and the replays read them); a reset lists its next sale. A sale
    whose keys Redis lost leaves the list too: there is nothing to read, and the
    warm-up (``gate_warm``) lists it again.

    :raises redis.RedisError: Redis cannot be reached.
    """
    k = gate_keys(sku)
    listed = gate_redis().hget(SALES, sku)
    if listed is None:
        return False
    sale = _script(_FINISHED)(keys=[k.sale, k.stream], args=[GROUP])
    if sale is None:
        return False
    return bool(_script(_UNLIST)(keys=[SALES], args=[sku, sale or listed]))


def gate_settle(until: float) -> None:
    """Wait until ``until`` (from ``gate_close``): past it, no process answers from
    a memory of the closed sale."""
    time.sleep(max(until - time.monotonic(), 0.0))


def _ms(epoch: float | None) -> str:
    return "" if epoch is None else str(round(epoch * 1000))


def _chunks(mapping: dict, size: int = 1000):
    items = list(mapping.items())
    for start in range(0, len(items), size):
        yield dict(items[start:start + size])


def replay_record(*, fingerprint: str, order_id: int, remaining: int, quantity: int, instance: str) -> str:
    """A key's replay record, as the script writes it."""
    return f"{fingerprint} {order_id} {remaining} {quantity} {instance}"


# --- selling ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GateSold:
    order_id: int
    remaining: int
    quantity: int
    instance: str
    replayed: bool
    script_ms: float  # the script's round trip: the longest the stock could have been held


def gate_sell(*, sku: str, quantity: int, user_id: str, key: str, keyed: bool, fingerprint: str) -> GateSold:
    """Run the sale's script for one purchase.

    :raises NotStarted, Ended: outside the sale's window (on Redis' clock).
    :raises SoldOut: Redis has fewer than ``quantity`` units left.
    :raises LimitReached: the buyer has no room left under the per-user limit.
    :raises IdempotencyConflict: the key was used with a different request.
    :raises GateCold: Redis holds no sale of this product (it may have none: the
        caller asks the database).
    :raises Unavailable: Redis cannot be reached.
    :raises OutcomeUnknown: the reply was lost: the order may have been accepted.
    """
    if _remembered_sold_out(sku, key=key, keyed=keyed):
        raise SoldOut.short_of(sku, quantity, 0)
    started = time.perf_counter()
    try:
        reply = _sell(keys=gate_keys(sku), args=[
            key, fingerprint, quantity, user_id, settings.FLASHSALE_INSTANCE,
            settings.FLASHSALE_PER_USER_LIMIT, "1" if keyed else "0"])
    except redis.RedisError as e:
        if _unreachable(e):
            raise Unavailable("the gate's Redis cannot be reached; nothing was taken",
                              backend="redis") from e
        raise OutcomeUnknown("the gate's reply was lost: whether the order was accepted is unknown; "
                             "retry with the same Idempotency-Key to learn it", order_id=None) from e
    script_ms = (time.perf_counter() - started) * 1000
    verdict = reply[0]
    if verdict == "accepted":
        return GateSold(order_id=int(reply[1]), remaining=int(reply[2]), quantity=quantity,
                        instance=settings.FLASHSALE_INSTANCE, replayed=False, script_ms=script_ms)
    if verdict == "replay":
        known, order_id, remaining, bought, instance = reply[1].split(" ", 4)
        if known != fingerprint:
            raise IdempotencyConflict("this Idempotency-Key was used with a different request",
                                      extra={"order_id": int(order_id)})
        return GateSold(order_id=int(order_id), remaining=int(remaining), quantity=int(bought),
                        instance=instance, replayed=True, script_ms=script_ms)
    if verdict == "not_started":
        raise not_started(sku=sku, starts_at=int(reply[1]) / 1000, now=int(reply[2]) / 1000)
    if verdict == "ended":
        raise ended(sku=sku, ends_at=int(reply[1]) / 1000)
    if verdict == "sold_out":
        left = int(reply[1])
        if left == 0:
            _remember_sold_out(sku)
        raise SoldOut.short_of(sku, quantity, left)
    if verdict == "limit":
        raise LimitReached.of(sku, user_id, settings.FLASHSALE_PER_USER_LIMIT)
    raise GateCold(f"the gate holds no stock of {sku} (Redis lost it): reset it, or run "
                   "`manage.py gate_warm`", backend="gate")


@dataclass(frozen=True)
class _SoldOut:
    """A sale this process found sold out."""

    opened: str  # which sale (its "opened"): a reset opens another
    until: float  # time.monotonic(): past it, the script decides again
    keys: frozenset[str] | None  # the keys it accepted (their replays); None: too many to hold


# sku -> its sale, found sold out. Read without a lock: a dict's get and set are atomic.
_sold_out: dict[str, _SoldOut] = {}
_SOLD_OUT_MAX = 10_000  # products; past it, the memories start over
_remembering = threading.Lock()  # one read of a sold-out sale at a time per process


def _remembered_sold_out(sku: str, *, key: str, keyed: bool) -> bool:
    """Whether this process knows the sale sold out, and ``key`` (if ``keyed``) is
    not one of its orders' (a replay, which the script answers)."""
    memory = _sold_out.get(sku)
    if memory is None or time.monotonic() >= memory.until:
        return False
    return not keyed or (memory.keys is not None and key not in memory.keys)


def _remember_sold_out(sku: str) -> None:
    """Read what makes the sold-out answer safe to give from memory: the sale's stock
    still 0, its keys, its window's end. A sale stays sold out until a reset, which
    waits out the memory (``gate_close``); the window's end bounds it too, since
    past the end the answer is "ended". One thread per process reads; the others
    ask the script meanwhile. A failure only leaves the memory out."""
    if not settings.FLASHSALE_SOLDOUT_FAST_PATH or not _remembering.acquire(blocking=False):
        return
    try:
        known = _sold_out.get(sku)
        asked = time.monotonic()  # the memory runs from before the read: see gate_close
        k = gate_keys(sku)
        reply = _script(_SOLD_OUT)(keys=[k.sale, k.keys], args=[
            known.opened if known else "", settings.FLASHSALE_GATE_SOLD_OUT_KEYS])
    except redis.RedisError as e:
        logger.info("could not read the sold-out sale of %s to remember it: %s", sku, e)
        return
    finally:
        _remembering.release()
    if len(reply) < 3:  # restocked by a reset meanwhile, or no sale
        _sold_out.pop(sku, None)
        return
    _, opened, ends_in_ms, *keys = reply
    if keys:
        held = frozenset(keys[0])
    else:  # this sale's keys, as read before, or too many
        held = known.keys if known and known.opened == opened else None
    lasts = settings.FLASHSALE_GATE_SOLD_OUT_MEMORY
    if ends_in_ms >= 0:
        lasts = min(lasts, ends_in_ms / 1000)
    if len(_sold_out) >= _SOLD_OUT_MAX:
        _sold_out.clear()
    _sold_out[sku] = _SoldOut(opened=opened, until=asked + lasts, keys=held)


class GateCold(Unavailable):
    """Redis holds no sale of the product: it lost it, or the product has none (it does
    not exist, or its sale runs under a strategy that does not sell through the gate)."""


# --- following an order, and the tally ---------------------------------------------------


@dataclass(frozen=True)
class OrderStatus:
    """An order as its buyer can follow it."""

    order_id: int
    sku: str
    quantity: int
    strategy: str
    instance: str
    # "confirmed" (in the database), "accepted" (in the gate's stream) or
    # "dead_lettered" (the persisters could not write it).
    status: str


def gate_order_get(*, order_id: int) -> OrderStatus | None:
    """An order the gate accepted that the database does not have (yet)."""
    if order_id % 2:
        return None  # odd: one of MySQL's ids
    sale = GateSale.objects.select_related("product").filter(pk=order_id >> ID_BLOCK_SHIFT).first()
    if sale is None:
        return None
    k = gate_keys(sale.product.sku)
    client = gate_redis()
    try:
        where = client.hget(k.orders, str(order_id))
        if where is None:
            return None
        status, _, entry_id = where.rpartition(" ")
        entries = client.xrange(k.stream, entry_id, entry_id)
    except redis.RedisError as e:
        raise Unavailable("the gate's Redis cannot be reached", backend="redis") from e
    if not entries:
        return None
    fields = entries[0][1]
    return OrderStatus(order_id=order_id, sku=sale.product.sku, quantity=int(fields["quantity"]),
                       strategy="gate", instance=fields["instance"],
                       status="dead_lettered" if status == "dead" else "accepted")


@dataclass(frozen=True)
class GateTally:
    """The gate's side of a sale, for the audit."""

    redis_remaining: int
    loaded: int  # the stock Redis was loaded with
    accepted: int  # orders in the stream
    accepted_quantity: int
    unacknowledged: int  # entries a persister read and has not acknowledged
    undelivered: int  # entries no persister has read yet
    dead_lettered: int


def gate_tally(*, sku: str) -> GateTally | None:
    """The gate's counts for ``sku``; None if Redis holds no sale of it."""
    k = gate_keys(sku)
    client = gate_redis()
    try:
        sale = client.hgetall(k.sale)
        if not sale:
            return None
        accepted, dead = client.xlen(k.stream), client.xlen(k.dead)
        group = next((g for g in client.xinfo_groups(k.stream) if g["name"] == GROUP), None)
    except redis.RedisError as e:
        raise Unavailable("the gate's Redis cannot be reached", backend="redis") from e
    return GateTally(
        redis_remaining=int(sale["stock"]), loaded=int(sale["loaded"]), accepted=accepted,
        accepted_quantity=int(sale["accepted"]),
        unacknowledged=group["pending"] if group else 0,
        # "lag" is what the group has not been delivered yet (Redis 7).
        undelivered=(group.get("lag") or 0) if group else accepted,
        dead_lettered=dead,
    )


def keys_of_orders(product: Product) -> tuple[dict[str, str], dict[str, int]]:
    """The replay records and per-user counts of the product's orders in the
    database: what a warm-up loads so that Redis answers for the orders it lost."""
    after = flows_after(product=product)
    records, bought = {}, {}
    for order in Order.objects.filter(product=product):
        records[order.idempotency_key] = replay_record(
            fingerprint=request_fingerprint(sku=product.sku, quantity=order.quantity, user_id=order.user_id),
            order_id=order.pk, remaining=after.get(order.idempotency_key, 0), quantity=order.quantity,
            instance=order.instance)
        bought[order.user_id] = bought.get(order.user_id, 0) + order.quantity
    return records, bought
