"""The gate's purchase: the sale's script run for one buyer, on a connection of the
thread's own, and what a process remembers of a sale it found sold out."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import redis
from django.conf import settings

from common.errors import (
    IdempotencyConflict,
    LimitReached,
    OutcomeUnknown,
    SoldOut,
    Unavailable,
)
from common.memory import ProcessMemory
from common.metrics import observe_later

from ..window import ended, not_started
from .metrics import SCRIPT_BATCH
from .pipeline import ScriptPipeline, fresh
from .store import _SELL, _SOLD_OUT, GateKeys, _script, _unreachable, gate_keys

logger = logging.getLogger(__name__)


_threads = threading.local()
_pipelines: dict[int, ScriptPipeline] = {}  # id(the client) -> the sale script's batches
_pipelines_mutex = threading.Lock()


def _sell(*, keys: GateKeys, args: list) -> list:
    """The sale's script, run as the client runs a script (by its hash, loaded first
    if Redis does not know it) but without the client's pool, its retry wrapper and
    its script object on the way, which were a large share of an accepted purchase's
    CPU (``python -m benchmarks.purchase_cpu``): sent with the scripts of the other
    purchases this process serves at once (``pipeline``), or with
    ``FLASHSALE_GATE_PIPELINE`` off alone, on this thread's own connection. On a
    Redis Cluster its client runs it, in the product's slot."""
    script = _script(_SELL)
    if settings.FLASHSALE_GATE_REDIS_CLUSTER:
        return script(keys=list(keys), args=args)
    if settings.FLASHSALE_GATE_PIPELINE:
        return _pipeline(script).run(list(keys), args)
    return _sell_alone(script, keys=keys, args=args)


def _pipeline(script) -> ScriptPipeline:
    """The process's batches of the script, on the current client."""
    pipeline = _pipelines.get(id(script.registered_client))
    if pipeline is None or not pipeline.belongs_here():
        with _pipelines_mutex:
            pipeline = _pipelines.get(id(script.registered_client))
            if pipeline is None or not pipeline.belongs_here():
                pipeline = _pipelines[id(script.registered_client)] = ScriptPipeline(
                    script, sent=lambda n: observe_later(SCRIPT_BATCH, ("sell",), n))
    return pipeline


def _sell_alone(script, *, keys: GateKeys, args: list) -> list:
    """The script in a round trip of its own, on this thread's connection."""
    client = script.registered_client  # the process's client, as gate_redis() has it
    connection = getattr(_threads, "connection", None)
    if connection is None or _threads.client is not client:
        connection = client.connection_pool.make_connection()
        _threads.connection, _threads.client = connection, client
    fresh(connection)
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
    keys: frozenset[str] | None  # the keys it accepted (their replays); None: too many to hold


# sku -> its sale, found sold out, for FLASHSALE_GATE_SOLD_OUT_MEMORY seconds at most
# from the read (until the window's end, if sooner): past it, the script decides again.
_sold_out: ProcessMemory[str, _SoldOut] = ProcessMemory(
    "the gate's sales found sold out", seconds=lambda: settings.FLASHSALE_GATE_SOLD_OUT_MEMORY)
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
    if not settings.FLASHSALE_SOLDOUT_FAST_PATH or not _remembering.acquire(blocking=False):
        return
    try:
        known = _sold_out.last(sku)
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
        _sold_out.pop(sku)
        return
    _, opened, ends_in_ms, *keys = reply
    if keys:
        held = frozenset(keys[0])
    else:  # this sale's keys, as read before, or too many
        held = known.keys if known and known.opened == opened else None
    lasts = settings.FLASHSALE_GATE_SOLD_OUT_MEMORY
    if ends_in_ms >= 0:
        lasts = min(lasts, ends_in_ms / 1000)
    _sold_out.put(sku, _SoldOut(opened=opened, keys=held), since=asked, seconds=lasts)


class GateCold(Unavailable):
    """Redis holds no sale of the product: it lost it, or the product has none (it does
    not exist, or its sale runs under a strategy that does not sell through the gate)."""

