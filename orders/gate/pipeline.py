"""The sale's scripts of the purchases a process serves at once, sent to the gate's
Redis together: one write and one read of one connection for all of them, where each
purchase had a round trip of its own (auto-pipelining, which redis-py does not do).

The first purchase to come while no batch is out sends what is waiting, its own
script included, and reads the replies, which Redis sends in the order it ran the
scripts. Purchases that come meanwhile wait; once the replies are in, the first of
them sends the next batch. Under load a batch holds about as many purchases as the
process serves at once; alone, a purchase goes out at once, as before.

Each script is still its own atomic step on the server: a batch is not a
transaction, and nothing of one purchase depends on another's. What a purchase is
told stays true to what happened to its own script:

- the connection cannot be made: nothing was sent, every purchase of the batch is
  told so (the caller answers "unavailable");
- the connection fails after the batch went out: a purchase whose reply was read
  has it; the others' scripts may have run, and they are told their reply was lost
  (the caller answers "outcome unknown");
- a script's error reply is that purchase's alone, and the replies after it are
  read on; Redis not knowing the script (a restart) ran none of them, so the script
  is loaded and those purchases sent again.

Each script is given, as its last argument, the run id of the server the
connection reached (``common.gateredis.IdentifiedConnection``), known only once it is connected.

Asked to (``wait``), a batch ends with ``WAIT replicas timeout``: Redis answers it
once what the connection last wrote reached that many replicas, or the timeout
passed, and each purchase of the batch is told how many replicas it reached.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import redis
from redis.connection import ConnectionInterface


class Replied(NamedTuple):
    value: Any  # the script's reply
    replicas: int | None  # the replicas its batch's WAIT counted; None: not asked, or its reply lost


class _Purchase:
    """One script waiting in a batch: its command (without the server's id), then
    its reply or error."""

    __slots__ = ("command", "reply", "replicas", "error", "answered", "woken")

    def __init__(self, command: tuple[Any, ...]) -> None:
        self.command = command
        self.reply: Any = None
        self.replicas: int | None = None
        self.error: BaseException | None = None
        self.answered = False
        self.woken = threading.Event()  # answered, or (not answered) to send the next batch


class ScriptPipeline:
    """A script run by many threads of one process, batched on one connection."""

    def __init__(self, script: redis.commands.core.Script, *, sent: Callable[[int], None] = lambda n: None,
                 wait: Callable[[], tuple[int, int] | None] = lambda: None):
        self._script = script
        self._sent = sent  # told each batch's size, once its replies are in
        self._wait = wait  # (replicas, timeout in ms) for the WAIT after each batch; None: none
        client = script.registered_client
        if not isinstance(client, redis.Redis):  # a Cluster sells per node (orders.gate.sell)
            raise TypeError("a script pipeline runs on one Redis, not a Cluster")
        self._client = client
        self._pid = os.getpid()
        self._connection: ConnectionInterface | None = None
        self._mutex = threading.Lock()
        self._waiting: list[_Purchase] = []
        self._out = False  # a batch is being sent or read

    def belongs_here(self) -> bool:
        """Made in this process (a forked worker makes its own)."""
        return self._pid == os.getpid()

    def run(self, keys: list[str], args: list[Any]) -> Replied:
        """The script's reply to ``keys`` and ``args`` and the replicas it reached, or
        its error (a ``redis.RedisError``, as the client raises it)."""
        purchase = _Purchase(("EVALSHA", self._script.sha, len(keys), *keys, *args))
        with self._mutex:
            self._waiting.append(purchase)
            leads, self._out = not self._out, True
        if not leads:
            purchase.woken.wait()  # answered, or told to send the next batch (its own in it)
        if not purchase.answered:
            self._send_waiting()
        if purchase.error is not None:
            raise purchase.error
        return Replied(purchase.reply, purchase.replicas)

    def _send_waiting(self) -> None:
        """Send every purchase waiting, answer each, then hand the next batch to the
        first purchase that came meanwhile (or none is out)."""
        with self._mutex:
            batch, self._waiting = self._waiting, []
        try:
            self._exchange(batch)
        except BaseException as e:  # a bug here must not leave a purchase waiting forever
            for purchase in batch:
                if not purchase.answered:
                    purchase.error = e
            raise
        finally:
            for purchase in batch:
                purchase.answered = True
                purchase.woken.set()
            with self._mutex:
                if self._waiting:
                    self._waiting[0].woken.set()  # not answered: it sends the next batch
                else:
                    self._out = False

    def _exchange(self, batch: list[_Purchase], *, loaded: bool = False) -> None:
        connection = self._fresh_connection()
        try:
            connection.connect()  # a failure here: nothing was sent
        except redis.RedisError as e:
            for purchase in batch:
                purchase.error = e
            return
        wait = self._wait()
        for purchase in batch:
            # Only this exchange's WAIT vouches for what it sends: a count from an
            # earlier one (a batch refused for NOSCRIPT, sent again) covered less.
            purchase.replicas = None
        server = getattr(connection, "server_id", "")
        commands = [(*p.command, server) for p in batch] + ([("WAIT", *wait)] if wait else [])
        read = 0
        try:
            connection.send_packed_command(connection.pack_commands(commands))
            for purchase in batch:
                try:
                    purchase.reply = connection.read_response()
                except redis.ResponseError as e:  # this script's own error, read in full
                    purchase.error = e
                read += 1
            if wait:
                replicas = int(connection.read_response())
                for purchase in batch:
                    purchase.replicas = replicas
        except BaseException as e:
            connection.disconnect()  # mid-reply: the next batch connects anew
            for purchase in batch[read:]:
                purchase.error = e
            if not isinstance(e, redis.RedisError):
                raise
            return
        self._sent(len(batch))
        unknown = [p for p in batch if isinstance(p.error, redis.exceptions.NoScriptError)]
        if unknown and not loaded:  # none of them ran
            self._loaded_and_sent(unknown)

    def _loaded_and_sent(self, unknown: list[_Purchase]) -> None:
        """Load the script Redis did not know (a restart, a failover) and send again
        the purchases that met NOSCRIPT: none of them ran."""
        try:
            self._client.script_load(self._script.script)
        except redis.RedisError as e:
            for purchase in unknown:
                purchase.error = e
            return
        for purchase in unknown:
            purchase.error = None
        self._exchange(unknown, loaded=True)

    def _fresh_connection(self) -> ConnectionInterface:
        """The process's connection, checked as ``fresh`` says."""
        if self._connection is None:
            self._connection = self._client.connection_pool.make_connection()
        fresh(self._connection)
        return self._connection


def fresh(connection: ConnectionInterface) -> None:
    """Drop the connection if Redis closed it since its last command (a restart): a
    command sent on it would fail with a lost reply, "outcome unknown", though it
    never ran. The pool checks its connections the same way before it lends one."""
    try:
        stale = connection.can_read()  # data or EOF waiting before a command is sent
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        stale = True
    if stale:
        connection.disconnect()  # the command connects anew (or says Redis cannot be reached)
