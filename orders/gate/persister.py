"""The persisters: the gate's streams, written to MySQL in batches.

Each persister (``manage.py persist_orders``, two on the local stack) reads every
gate product's stream in one consumer group, so each entry goes to one of them. A
batch is written in one transaction (its orders, their ledger rows, one UPDATE of
the stock row) and acknowledged (XACK) only after the commit. So:

- a persister that dies before its commit leaves its entries pending; once they
  have been idle ``FLASHSALE_GATE_CLAIM_IDLE_MS``, another claims them (XAUTOCLAIM);
- one that dies between its commit and its XACK leaves entries that are written
  already: the next to read them finds their orders and acknowledges them. Writing
  is idempotent on the order id (and the operation flag, unique in the ledger);
- an entry that cannot be written (the database refuses it: Redis sold stock the
  database does not have, a key with another order) is copied to the product's
  dead-letter stream with the reason, and acknowledged: it never blocks the rest.
  The audit counts it, and ``GET /api/orders/<id>`` answers ``dead_lettered``.

A database that cannot be reached stops nothing but the writing: the entries stay
pending with this persister, which tries them again until the database is back.

A sale whose Redis failed over (or restarted) since it opened is refused by the sale's
script until it is reconciled; the persisters look for such sales every
``FAILOVERS_READ_EVERY`` seconds while they write, at once after their connection to
Redis failed, and at each round of an idle wait, and reconcile each once its stream is
written (``orders.gate.reconcile``).
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import cast

import redis
from django.conf import settings
from django.db import DatabaseError, transaction
from redis.typing import KeyT, StreamIdT

from common.errors import Busy, Unavailable
from common.gateredis import Entries, stream_entries, text
from common.liveness import heartbeat

from . import metrics
from .intents import Intent, Written, intents_write
from .lifecycle import gate_list_upgrade, gate_listed, gate_unlist_finished
from .reconcile import gate_failed_over, gate_reconcile
from .store import GROUP, gate_keys, gate_redis, lua_source

logger = logging.getLogger(__name__)


_DEAD_LETTER = lua_source("dead_letter")  # an entry the database refused, set aside once


def default_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


# The persisters look this often for sales whose Redis failed over: a sale waits
# about this long, paused, before its reconciliation begins.
FAILOVERS_READ_EVERY = 0.2
# An idle persister's longest wait for entries (a sale that opens ends it). Each wait
# ends in calls to Redis and a turn of the loop, the CPU an idle persister spends. A
# failover ends a wait on one Redis (the connection that waits breaks, or is unblocked
# as its server becomes a replica), and the next round looks for failovers at once; a
# cluster's persister polls, so it waits no longer than FAILOVERS_READ_EVERY while a
# sale is listed.
IDLE_MS = 1000
# The persisters read how full the gate's Redis is this often, and log an error past
# this share of its maxmemory.
MEMORY_READ_EVERY = 10.0
MEMORY_ALARM = 0.8


class Persister:
    """One consumer of the gate streams' group. ``run`` loops until ``stop`` is set;
    ``step`` is one round (the tests drive it). A round waits for new entries, and
    then reads the list of products again: a sale that opens ends that wait
    (``gate_open`` unblocks it), or is read within it if that fails. The wait is
    ``block_ms``, and after rounds that found nothing twice the last, up to
    ``idle_ms`` (on a Redis Cluster, while a sale is listed, up to
    ``FAILOVERS_READ_EVERY``, at which a failover is looked for). New entries of a
    listed sale end the wait as they come.

    After a round that found fewer entries than a batch holds, ``run`` waits
    ``linger_ms`` before the next, so that the next finds more: a round costs the CPU
    of many orders' rows (its transaction, its statements, its reads of Redis),
    and under load a persister that reads as soon as one entry comes spends it on
    batches of a few."""

    # Past six parameters: manage.py persist_orders's options and its stop event, and
    # the waits the tests shorten (block_ms, idle_ms).
    def __init__(self, name: str | None = None, *, batch: int | None = None,  # noqa: PLR0913
                 claim_idle_ms: int | None = None, block_ms: int = 100, idle_ms: int = IDLE_MS,
                 linger_ms: int | None = None, stop: threading.Event | None = None,
                 alive: Path | None = None):
        self.name = name or default_name()
        self.batch = batch or settings.FLASHSALE_GATE_BATCH
        self.linger_ms = settings.FLASHSALE_GATE_LINGER_MS if linger_ms is None else linger_ms
        self.claim_idle_ms = settings.FLASHSALE_GATE_CLAIM_IDLE_MS if claim_idle_ms is None else claim_idle_ms
        self.block_ms, self.idle_ms = block_ms, idle_ms
        self._found_nothing = 0  # rounds in a row that acknowledged nothing
        self.stop = stop or threading.Event()
        self.alive = alive  # touched at every round: a liveness probe sees the write loop turn
        self.redis = gate_redis()
        self._list_upgraded()
        self._dead_letter = self.redis.register_script(_DEAD_LETTER)
        self._claimed_at = self._memory_read_at = self._failovers_read_at = -math.inf

    def _list_upgraded(self) -> None:
        """Connected (the stack's readiness probe looks for this persister's
        connection) and the list's earlier form moved, once the gate's Redis takes
        writes: one starting, or whose replicas are not yet in step under
        ``min-replicas-to-write`` (NOREPLICAS), is waited for as a failed round is."""
        while not self.stop.is_set():
            try:
                self.redis.ping()
                moved = gate_list_upgrade()
            except redis.RedisError as e:
                logger.warning("persister %s: Redis, as it starts: %s; trying again", self.name, e)
                self.stop.wait(0.5)
                continue
            if moved:
                logger.info("persister %s: %d sales moved onto the persisters' list from its earlier form",
                            self.name, moved)
            return

    def run(self) -> None:
        logger.info("persister %s: reading the gate streams (batches of %d)", self.name, self.batch)
        while not self.stop.is_set():
            heartbeat(self.alive)
            try:
                if 0 < self.step() < self.batch:
                    self.stop.wait(self.linger_ms / 1000)
            except redis.RedisError as e:
                logger.warning("persister %s: Redis: %s; trying again", self.name, e)
                self._failovers_read_at = -math.inf  # a failover breaks the connection: look at once
                self.stop.wait(0.5)
            except DatabaseError as e:
                # Nothing was acknowledged: the entries stay pending with this
                # persister, which reads them again first.
                logger.warning("persister %s: database: %s; trying again", self.name, e)
                transaction.get_connection().close()  # the next round connects anew
                self.stop.wait(0.5)

    def memory_check(self) -> float | None:
        """How full the gate's Redis is (used over maxmemory), logged as an error past
        ``MEMORY_ALARM``: it never evicts, so once full it refuses new purchases (503)
        until the persisters catch up or it is given more. None: no limit is set, or
        a Redis Cluster (each node keeps its own)."""
        if settings.FLASHSALE_GATE_REDIS_CLUSTER:
            return None
        memory = self.redis.info("memory")
        if not memory.get("maxmemory"):
            return None
        full: float = memory["used_memory"] / memory["maxmemory"]
        if full >= MEMORY_ALARM:
            logger.error("persister %s: the gate's Redis is %.0f%% full (%s of maxmemory %s, noeviction): "
                         "past 100%% it refuses purchases", self.name, full * 100,
                         memory["used_memory_human"], memory["maxmemory_human"])
        return full

    def step(self) -> int:
        """One round: claim entries a dead consumer left and take finished sales
        off the list (every ``claim_idle_ms / 2``), re-read this one's own pending
        entries, then wait for new ones (``wait_ms``). Returns how many entries it
        acknowledged."""
        done = self._round()
        self._found_nothing = 0 if done else self._found_nothing + 1
        return done

    def wait_ms(self, *, listed: bool) -> int:
        """This round's longest wait for new entries (the class says which)."""
        polled = listed and settings.FLASHSALE_GATE_REDIS_CLUSTER
        longest = max(self.block_ms, int(FAILOVERS_READ_EVERY * 1000) if polled else self.idle_ms)
        return min(self.block_ms << min(self._found_nothing, 16), longest)

    def _round(self) -> int:
        if time.monotonic() - self._memory_read_at >= MEMORY_READ_EVERY:
            self._memory_read_at = time.monotonic()
            self.memory_check()
        skus = gate_listed()
        if not skus:
            self.stop.wait(self.wait_ms(listed=False) / 1000)
            return 0
        if time.monotonic() - self._failovers_read_at >= FAILOVERS_READ_EVERY:
            self._failovers_read_at = time.monotonic()
            self._reconcile(skus)
        streams = {gate_keys(sku).stream: sku for sku in skus}
        done = 0
        if time.monotonic() - self._claimed_at >= self.claim_idle_ms / 2000:
            self._claimed_at = time.monotonic()
            done += self._claim(streams)
            for sku in gate_unlist_finished(streams.values()):
                logger.info("persister %s: the sale of %s is finished and written: off the list",
                            self.name, sku)
        wait = self.wait_ms(listed=True)
        try:
            replies = self._read_round(streams, wait)
        except redis.ResponseError as e:
            if "NOGROUP" not in str(e):
                raise
            # A sale closed since the list was read, or one whose keys Redis lost (on
            # the list until the next pass): this round reads the others.
            streams = {stream: sku for stream, sku in streams.items() if self._grouped(stream)}
            replies = self._read_round(streams, wait) if streams else []
        for stream, entries in replies:
            done += self._handle(streams[stream], entries)
        return done

    def _reconcile(self, skus: list[str]) -> None:
        """Rebuild the sales whose Redis failed over (``orders.gate.reconcile``) once
        their streams are written: until then each waits, paused, and this persister
        goes on writing."""
        for sku in gate_failed_over(skus):
            try:
                gate_reconcile(sku=sku)
            except (Busy, Unavailable) as e:  # tried again next round
                logger.info("persister %s: %s failed over, not reconciled yet: %s", self.name, sku, e)

    def _read_round(self, streams: dict[str, str], wait_ms: int) -> list[tuple[str, Entries]]:
        """This consumer's own pending entries first (a batch that failed), then new
        ones, waiting up to ``wait_ms`` for them."""
        return self._read(streams, "0") or self._read(streams, ">", wait_ms=wait_ms)

    def _grouped(self, stream: str) -> bool:
        try:
            return any(group["name"] == GROUP for group in self.redis.xinfo_groups(stream))
        except redis.ResponseError:  # no such stream
            return False

    def _read(self, streams: dict[str, str], start: str, *,
              wait_ms: int | None = None) -> list[tuple[str, Entries]]:
        """XREADGROUP over every stream, waiting up to ``wait_ms`` (None: not) for
        entries: one call on one Redis; on a cluster, where the streams live in
        different slots, one call per stream (and a pause when none had anything, in
        place of the blocking wait)."""
        if not settings.FLASHSALE_GATE_REDIS_CLUSTER:
            replies = self._read_group(dict.fromkeys(streams, start), block_ms=wait_ms)
        else:
            replies = [reply for stream in streams for reply in self._read_group({stream: start})]
            if wait_ms is not None and not any(entries for _, entries in replies):
                self.stop.wait(wait_ms / 1000)
        return [(stream, entries) for stream, entries in replies if entries]

    def _read_group(self, streams: dict[KeyT, StreamIdT],
                    block_ms: int | None = None) -> list[tuple[str, Entries]]:
        replies = self.redis.xreadgroup(GROUP, self.name, streams, count=self.batch, block=block_ms)
        # Decoded, as every reply of the gate's client (common.gateredis).
        return cast(list[tuple[str, Entries]], replies or [])

    def _claim(self, streams: dict[str, str]) -> int:
        """Write the entries another consumer left pending for ``claim_idle_ms``: every
        stream's XAUTOCLAIM in one pipeline (one round trip for the list, not one a
        sale), then again for those with more to scan. Returns how many it wrote."""
        done, starts = 0, dict.fromkeys(streams, "0-0")
        while starts:
            with self.redis.pipeline(transaction=False) as pipe:
                for stream, start in starts.items():
                    pipe.xautoclaim(stream, GROUP, self.name, self.claim_idle_ms, start_id=start,
                                    count=self.batch)
                replies = pipe.execute(raise_on_error=False)
            following: dict[str, str] = {}
            for stream, claimed in zip(starts, replies, strict=True):
                if isinstance(claimed, redis.ResponseError):
                    if "NOGROUP" not in str(claimed):  # NOGROUP: closed since the list was read
                        raise claimed
                    continue
                start, entries = text(claimed[0]), stream_entries(claimed[1])
                if entries:
                    logger.warning("persister %s: claimed %d entries of %s left by another", self.name,
                                   len(entries), streams[stream])
                    done += self._handle(streams[stream], entries)
                if start != "0-0":
                    following[stream] = start
            starts = following
        return done

    def _handle(self, sku: str, entries: Entries) -> int:
        keys = gate_keys(sku)
        intents: list[Intent] = []
        ids: list[str] = []
        dead: list[tuple[str, str | int, Mapping[str, object], str]] = []  # entry, order, its fields, why
        for entry_id, fields in entries:
            ids.append(entry_id)
            if not fields:
                continue  # deleted from the stream since it was delivered
            try:
                intents.append(Intent.parse(entry_id, fields))
            except ValueError as e:
                dead.append((entry_id, fields.get("order", ""), fields, str(e)))
        started = time.perf_counter()
        outcome = intents_write(intents) if intents else Written()
        if intents:
            metrics.WRITE_SECONDS.observe(time.perf_counter() - started)
            metrics.BATCH_SIZE.observe(len(intents))
        for intent, reason in outcome.dead:
            dead.append((intent.entry_id, intent.order_id, intent._asdict(), reason))
        # One line an order, named for the request that placed it: a buyer's purchase
        # followed from nginx's line to the write that confirmed it, or did not.
        for entry_id, order, letter, reason in dead:
            logger.error("persister %s: dead-lettered order %s of %s (entry %s): %s", self.name, order, sku,
                         entry_id, reason, extra={"request_id": letter.get("request") or None})
            flat = [str(part) for pair in letter.items() for part in pair]
            self._dead_letter(keys=[keys.orders, keys.dead], args=[str(order), entry_id, reason, *flat])
        self.redis.xack(keys.stream, GROUP, *ids)  # only now: everything above is committed
        _counted(outcome, dead=len(dead))
        for intent in outcome.written:
            logger.info("persister %s: wrote order %d of %s", self.name, intent.order_id, sku,
                        extra={"request_id": intent.request or None})
        return len(ids)


def _counted(outcome: Written, *, dead: int) -> None:
    """A batch's intents, by outcome, and each written order's wait since accepted."""
    for label, n in (("written", len(outcome.written)), ("already", len(outcome.already)),
                     ("closed", len(outcome.closed)), ("dead_lettered", dead)):
        if n:
            metrics.INTENTS.labels(label).inc(n)
    now = time.time()
    for intent in outcome.written:
        metrics.CONFIRM_SECONDS.observe(max(now - intent.accepted_at.timestamp(), 0.0))
