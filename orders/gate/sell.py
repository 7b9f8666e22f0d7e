"""The gate's purchase: the sale's script run for one buyer, on a connection of the
thread's own, and what a process remembers of a sale it found sold out."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import redis
from django.conf import settings
from redis.commands.core import Script

from common.errors import (
    IdempotencyConflict,
    LimitReached,
    OutcomeUnknown,
    SoldOut,
    Unavailable,
)
from common.gateredis import Identified, unreachable
from common.memory import ProcessMemory
from common.metrics import observe_later
from common.requestlog import request_id_current
from inventory.models import Stock
from inventory.selectors import product_get
from waitingroom.services import admission_refused_error
from waitingroom.store import spend_keys

from ..resolve import strategy_confirmed
from ..results import OrderResult, Purchase, Timings
from ..window import ended, not_started
from .metrics import SCRIPT_BATCH
from .pipeline import Replied, ScriptPipeline, fresh
from .store import SELL, SOLD_OUT, gate_keys, gate_script

logger = logging.getLogger(__name__)


_threads = threading.local()
_pipelines: dict[int, ScriptPipeline] = {}  # id(the client) -> the sale script's batches
_pipelines_mutex = threading.Lock()


def _replicas_waited() -> tuple[int, int] | None:
    """The WAIT after each script: (replicas, timeout in ms), or None (none asked)."""
    if settings.FLASHSALE_GATE_REPLICAS <= 0:
        return None
    return settings.FLASHSALE_GATE_REPLICAS, settings.FLASHSALE_GATE_REPLICA_WAIT_MS


def _pipeline(script: Script) -> ScriptPipeline:
    """The process's batches of the script, on the current client."""
    pipeline = _pipelines.get(id(script.registered_client))
    if pipeline is None or not pipeline.belongs_here():
        with _pipelines_mutex:
            pipeline = _pipelines.get(id(script.registered_client))
            if pipeline is None or not pipeline.belongs_here():
                pipeline = _pipelines[id(script.registered_client)] = ScriptPipeline(
                    script, sent=lambda n: observe_later(SCRIPT_BATCH, ("sell",), n), wait=_replicas_waited)
    return pipeline


def _sell_alone(script: Script, *, keys: list[str], args: list[Any]) -> Replied:
    """The script in a round trip of its own, on this thread's connection (its WAIT,
    if asked, in the same write)."""
    # The process's client, as gate_redis() has it: one Redis (gate_sell sends a Cluster's
    # purchases to _sell_on_cluster).
    client = cast(redis.Redis, script.registered_client)
    connection = getattr(_threads, "connection", None)
    if connection is None or _threads.client is not client:
        connection = client.connection_pool.make_connection()
        if not isinstance(connection, Identified):  # the script needs the server's id
            raise TypeError(f"the gate's Redis client makes {type(connection).__name__}s, not "
                            "identified ones (common.gateredis)")
        _threads.connection, _threads.client = connection, client
    fresh(connection)
    return _once_loaded(lambda: _exchange(connection, script, keys=keys, args=args), client)


def _exchange(connection: Identified, script: Script, *, keys: list[str], args: list[Any]) -> Replied:
    """The script, given the id of the server ``connection`` reached, and its WAIT if
    asked, in one write; their replies read. A connection that cannot be made sent
    nothing (its error says "connecting to"). Any failure but a script's error reply
    (read in full, and its WAIT's: the connection is in step) drops the connection,
    whatever it was in the middle of: the next purchase connects anew."""
    try:
        connection.connect()
        wait = _replicas_waited()
        commands = [("EVALSHA", script.sha, len(keys), *keys, *args, connection.server_id),
                    *([("WAIT", *wait)] if wait else [])]
        connection.send_packed_command(connection.pack_commands(commands))
        try:
            value = connection.read_response()
        except redis.ResponseError:
            if wait:
                try:  # the WAIT's, so the connection stays in step; the script's error is the answer
                    connection.read_response()
                except redis.ResponseError:
                    pass
            raise
        if not wait:
            return Replied(value, None)
        try:
            replicas = connection.read_response()
        except redis.ResponseError as e:
            raise redis.ConnectionError(f"the WAIT after the script failed: {e}") from e  # as a lost reply
        return Replied(value, int(replicas))
    except BaseException as e:
        if not isinstance(e, redis.ResponseError):
            connection.disconnect()
        raise


def _once_loaded(exchange: Callable[[], Replied], loader: redis.Redis) -> Replied:
    """``exchange()``, and once more after ``loader`` loads the sale's script if Redis
    did not know it (a restart without persistence): a NOSCRIPT reply ran nothing."""
    try:
        return exchange()
    except redis.exceptions.NoScriptError:
        loader.script_load(SELL)
        return exchange()


def _sell_on_cluster(script: Script, *, keys: list[str], args: list[Any]) -> Replied:
    """On a Redis Cluster, on a connection to the product's node, as ``_sell_alone``
    sends it. A node that no longer holds the product's slot (a failover moved it)
    runs nothing: the client learns the new layout, and the purchase is told Redis
    could not take it."""
    cluster = cast(redis.RedisCluster, script.registered_client)  # gate_sell sends only a Cluster's here
    node = cluster.get_redis_connection(cluster.get_node_from_key(keys[0]))  # every key in its slot
    pool = node.connection_pool
    connection = pool.get_connection()
    # Of the client's connection class (common.gateredis): it knows its server's id.
    identified = cast(Identified, connection)
    try:
        return _once_loaded(lambda: _exchange(identified, script, keys=keys, args=args), node)
    except _MOVED as e:  # it ran nothing there
        cluster.nodes_manager.initialize()
        raise redis.ConnectionError(f"connecting to the product's node: {type(e).__name__} {e}") from e
    finally:
        pool.release(connection)


# The node asked no longer serves the product's slot as a primary (a failover, a
# resharding): the script did not run.
_MOVED = (redis.exceptions.MovedError, redis.exceptions.AskError, redis.exceptions.ClusterDownError,
          redis.exceptions.TryAgainError, redis.exceptions.ReadOnlyError)


def gate_sell(purchase: Purchase, segments: list[Stock] | None) -> OrderResult:
    """The gate's purchase (the seller table's ``sell``; ``segments`` unread: the gate
    keeps no rows): the sale's script run for it, which decides, 201 ``accepted``; the
    database hears of the order from a persister, after the answer. With an admission
    (the room's sale it names, its signature checked at the door), the script spends
    it with its decision, for a sale with a waiting room.

    :raises AdmissionRefused: the sale has a waiting room, and the admission does not
        buy (none, another sale's, not admitted, expired, spent on another purchase).
    :raises NotStarted, Ended: outside the sale's window (on Redis' clock).
    :raises SoldOut: Redis has fewer than ``quantity`` units left.
    :raises LimitReached: the buyer has no room left under the per-user limit.
    :raises IdempotencyConflict: the key was used with a different request.
    :raises GateCold: Redis holds no sale of this product, which the product's row
        says it has (Redis lost it).
    :raises NotFound, Busy: no such product; or its sale was reset under another
        strategy meanwhile (Redis holds no sale: the row was asked).
    :raises Unavailable: Redis cannot be reached.
    :raises GateFailover: Redis is not the server that held the sale (a failover): it
        waits to be reconciled.
    :raises OutcomeUnknown: the reply was lost: the order may have been accepted.
    """
    # A purchase with an admission runs the script even so, which spends it: its slot
    # in the room frees, and the room admits the next buyer to be told sold out.
    sku, quantity, key, keyed = purchase.sku, purchase.quantity, purchase.key, purchase.keyed
    admission = purchase.admission.sale if purchase.admission else ""
    if not admission and _remembered_sold_out(sku, key=key, keyed=keyed):
        raise SoldOut.short_of(sku, quantity, 0)
    started = time.perf_counter()
    replicas = settings.FLASHSALE_GATE_REPLICAS
    try:
        # The room's keys only with an admission: without one the script reads none.
        keys = [*gate_keys(sku), *spend_keys(sku)] if admission else list(gate_keys(sku))
        args = [key, purchase.fingerprint, quantity, purchase.buyer, settings.FLASHSALE_INSTANCE,
                settings.FLASHSALE_PER_USER_LIMIT, "1" if keyed else "0", "1" if replicas > 0 else "0",
                admission, request_id_current()]
        # The script run as the client runs one (by its hash, loaded first if Redis
        # does not know it) but without the client's pool, its retry wrapper and its
        # script object on the way, which were a large share of an accepted
        # purchase's CPU (python -m benchmarks.purchase_cpu): sent with the scripts of
        # the other purchases this process serves at once (``pipeline``), or with
        # FLASHSALE_GATE_PIPELINE off alone, on this thread's own connection; on a
        # Redis Cluster, on the product's node. Each followed by WAIT on the same
        # connection when replicas are asked for (FLASHSALE_GATE_REPLICAS).
        script = gate_script(SELL)
        if settings.FLASHSALE_GATE_REDIS_CLUSTER:
            reply, reached = _sell_on_cluster(script, keys=keys, args=args)
        elif settings.FLASHSALE_GATE_PIPELINE:
            reply, reached = _pipeline(script).run(keys, args)
        else:
            reply, reached = _sell_alone(script, keys=keys, args=args)
    except redis.RedisError as e:
        if unreachable(e):
            raise Unavailable("the gate's Redis cannot be reached; nothing was taken",
                              backend="redis") from e
        if str(e).startswith("NOREPLICAS"):  # min-replicas-to-write: it refused the first write
            raise Unavailable("the gate's Redis has too few replicas in sync to take a purchase; "
                              "nothing was taken", backend="redis") from e
        raise OutcomeUnknown("the gate's reply was lost: whether the order was accepted is unknown; "
                             "retry with the same Idempotency-Key to learn it", order_id=None) from e
    return _answered(purchase, reply, reached=reached, script_ms=(time.perf_counter() - started) * 1000)


def _answered(purchase: Purchase, reply: list[Any], *, reached: int | None, script_ms: float) -> OrderResult:
    """The purchase's answer from the script's ``reply``, its batch having reached
    ``reached`` replicas, after ``script_ms``: the longest the stock could have been held."""
    verdict, replicas = reply[0], settings.FLASHSALE_GATE_REPLICAS
    if verdict == "failover":
        raise GateFailover("the gate's Redis is not the server that held this sale (a failover or a "
                           "restart): the sale pauses until it is reconciled with the database; nothing "
                           "was taken", backend="gate")
    if replicas > 0 and verdict != "cold" and (reached or 0) < replicas:
        _unreplicated(reply, reached=reached or 0, replicas=replicas)
    if verdict == "accepted":
        return OrderResult(order_id=int(reply[1]), sku=purchase.sku, quantity=purchase.quantity,
                           strategy=purchase.strategy.name, instance=settings.FLASHSALE_INSTANCE,
                           status="accepted", remaining=int(reply[2]), replayed=False,
                           timings=Timings(lock_wait_ms=0.0, hold_ms=script_ms))
    if verdict == "replay":
        known, order_id, remaining, bought, instance = reply[1].split(" ", 4)
        if known != purchase.fingerprint:
            raise IdempotencyConflict("this Idempotency-Key was used with a different request",
                                      extra={"order_id": int(order_id)})
        return OrderResult(order_id=int(order_id), sku=purchase.sku, quantity=int(bought),
                           strategy=purchase.strategy.name, instance=instance, status="accepted",
                           remaining=int(remaining), replayed=True, timings=None)
    error = _refusal_error(reply, sku=purchase.sku, quantity=purchase.quantity, user_id=purchase.buyer)
    if isinstance(error, GateCold):
        # No sale in Redis: the product's row says whether it has one (Redis lost it)
        # or was reset under another strategy meanwhile (NotFound: no such product).
        strategy_confirmed(purchase.sku, product_get(sku=purchase.sku).strategy, purchase.strategy)
    raise error


def _refusal_error(reply: list[Any], *, sku: str, quantity: int, user_id: str) -> Exception:
    """The error the script's refusal ``reply`` says (a sold-out one remembered, when
    it holds for good)."""
    verdict = reply[0]
    if verdict == "admission":
        return admission_refused_error(sku=sku, reason=reply[1])
    if verdict == "not_started":
        return not_started(sku=sku, starts_at=int(reply[1]) / 1000, now=int(reply[2]) / 1000)
    if verdict == "ended":
        return ended(sku=sku, ends_at=int(reply[1]) / 1000)
    if verdict == "sold_out":
        left = int(reply[1])
        # A sale with a payment window gets units back as unpaid orders expire: its
        # sold-out answer holds only as it is given, and no process remembers it.
        if left == 0 and reply[2:3] != ["1"]:
            _remember_sold_out(sku)
        return SoldOut.short_of(sku, quantity, left)
    if verdict == "limit":
        return LimitReached.of(sku, user_id, settings.FLASHSALE_PER_USER_LIMIT)
    return GateCold(f"the gate holds no stock of {sku} (Redis lost it): reset it, or run "
                    "`manage.py gate_warm`", backend="gate")


def _unreplicated(reply: list[Any], *, reached: int, replicas: int) -> None:
    """A script's answer that did not reach ``replicas`` replicas in time: a failover
    now could take it back, so it is not given. An order accepted (or replayed) may
    hold or not: its key learns which. A refusal took nothing.

    :raises OutcomeUnknown: an accepted or replayed order.
    :raises Unavailable: a refusal.
    """
    why = (f"the gate's Redis reached {reached} of {replicas} replicas within "
           f"{settings.FLASHSALE_GATE_REPLICA_WAIT_MS} ms")
    if reply[0] in ("accepted", "replay"):
        order_id = int(reply[1]) if reply[0] == "accepted" else int(reply[1].split(" ")[1])
        raise OutcomeUnknown(f"{why}: the order may not survive a failover; retry with the same "
                             "Idempotency-Key to learn whether it holds", order_id=order_id)
    raise Unavailable(f"{why}: the sale's state could not be confirmed; nothing was taken", backend="redis")


@dataclass(frozen=True)
class _SoldOut:
    """A sale this process found sold out."""

    opened: str  # which sale (its "opened"): a reset opens another
    keys: frozenset[str] | None  # the keys it accepted (their replays); None: too many to hold


# sku -> its sale, found sold out, for FLASHSALE_GATE_SOLD_OUT_MEMORY_S seconds at most
# from the read (until the window's end, if sooner): past it, the script decides again.
_sold_out: ProcessMemory[str, _SoldOut] = ProcessMemory(
    "the gate's sales found sold out", seconds=lambda: settings.FLASHSALE_GATE_SOLD_OUT_MEMORY_S)
_remembering = threading.Lock()  # one read of a sold-out sale at a time per process


def sold_out_forget(sku: str) -> None:
    """This process closed the sale: what it remembers of it goes with it."""
    _sold_out.pop(sku)


def _remembered_sold_out(sku: str, *, key: str, keyed: bool) -> bool:
    """Whether this process knows the sale sold out, and ``key`` (if ``keyed``) is
    not one of its orders' (a replay, which the script answers)."""
    memory = _sold_out.get(sku)
    if memory is None:
        return False
    return not keyed or (memory.keys is not None and key not in memory.keys)


def _remember_sold_out(sku: str) -> None:
    """Read what makes the sold-out answer safe to give from memory: the sale's stock
    still 0, its keys, its window's end. A sale stays sold out until a reset, which
    waits out the memory (``gate_close``); the window's end bounds it too, since
    past the end the answer is "ended". One thread per process reads; the others
    ask the script meanwhile. A failure only leaves the memory out."""
    if not settings.FLASHSALE_SOLD_OUT_FAST_PATH or not _remembering.acquire(blocking=False):
        return
    try:
        known = _sold_out.last(sku)
        asked = time.monotonic()  # the memory runs from before the read: see gate_close
        k = gate_keys(sku)
        reply = gate_script(SOLD_OUT)(keys=[k.sale, k.keys], args=[
            known.opened if known else "", settings.FLASHSALE_GATE_SOLD_OUT_KEYS])
    except redis.RedisError as e:
        logger.info("could not read the sold-out sale of %s to remember it: %s", sku, e)
        return
    finally:
        _remembering.release()
    if len(reply) < 3:  # restocked by a reset meanwhile, or no sale
        _sold_out.pop(sku)
        return
    _, opened, ends_in_ms, *keys = reply
    held: frozenset[str] | None
    if keys:
        held = frozenset(keys[0])
    else:  # this sale's keys, as read before, or too many
        held = known.keys if known and known.opened == opened else None
    lasts = settings.FLASHSALE_GATE_SOLD_OUT_MEMORY_S
    if ends_in_ms >= 0:
        lasts = min(lasts, ends_in_ms / 1000)
    _sold_out.put(sku, _SoldOut(opened=opened, keys=held), since=asked, seconds=lasts)


class GateFailover(Unavailable):
    """The server that answered is not the one that held the sale: what it has may be
    behind what the other answered. Nothing is sold until the sale is reconciled
    (``orders.gate.reconcile``)."""


class GateCold(Unavailable):
    """Redis holds no sale of the product: it lost it, or the product has none (it does
    not exist, or its sale runs under a strategy that does not sell through the gate)."""

