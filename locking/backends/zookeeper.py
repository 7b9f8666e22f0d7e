"""``zookeeper``: kazoo's lock recipe (article 002's "efficient" lock).

Each contender creates an ephemeral sequential node under ``<root>/<name>`` and
watches only the node just before its own, so a release wakes exactly one waiter
(no herd effect; the naive single-node lock is in ``locking.teaching``).

Failure semantics: the nodes are ephemeral, so a holder whose session ends (process
killed, network partition longer than the session timeout) loses the lock and the
next contender gets it. The holder is told through the connection state: once the
connection is SUSPENDED or the session LOST after the acquisition,
:meth:`ZooKeeperLock.ensure_held` raises :class:`LockLostError`, and work done
under the lock must not be committed. (SUSPENDED may still end in a reconnect with
the lock intact; not knowing is treated as not holding.)

A contender that gives up (its wait timed out, or the connection failed under it)
must not leave its node: if the session outlives a cut, the node would stay as long
as the process lives, and once first in line hold the lock for nobody, for ever.
kazoo's recipe deletes it at best effort, but waits on that delete without a bound
(cut off, until the next connection). The backend does it instead: at once when
connected, waiting at most a session timeout, else when it is connected again.

One ``KazooClient`` per process and backend, started on first use, stopped at exit,
and started anew in a forked child. Cut off, it tries to connect again at most
``reconnect_max_s`` apart: kazoo's own schedule doubles its wait after every failed
try without a ceiling worth the name (an hour), so a server back after an outage
found its clients back only about as long again later, every one of them answering
"unavailable" meanwhile.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any
from urllib.parse import quote

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    LockTimeout,
    NoAuthError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import WatchedEvent
from kazoo.recipe.lock import Lock as KazooLock
from kazoo.retry import KazooRetry
from kazoo.security import make_digest_acl

from ..base import BaseLock, BaseLockBackend
from ..exceptions import LockLostError, LockNotOwnedError

_counters_mutex = threading.Lock()
_wakeups = {"recipe": 0}


def count_wakeup(kind: str) -> None:
    with _counters_mutex:
        _wakeups[kind] = _wakeups.get(kind, 0) + 1


def wakeups(kind: str) -> int:
    """Watch notifications that woke a waiter in this process, per lock kind."""
    with _counters_mutex:
        return _wakeups.get(kind, 0)


class CountingLock(KazooLock):  # type: ignore[misc]  # kazoo ships no types
    """kazoo's recipe, counting each time a waiter is woken by its predecessor's watch.
    The backend, not the recipe, deletes the node of a contender that gave up."""

    def _watch_predecessor(self, event: WatchedEvent) -> None:
        count_wakeup("recipe")
        super()._watch_predecessor(event)

    def _best_effort_cleanup(self) -> None:
        # kazoo waits on this cleanup without a bound, and a request made while the
        # connection is down waits for the next one: an acquire with a timeout would
        # last as long as the cut. ZooKeeperLockBackend.forget_contender does it instead.
        pass


class ZooKeeperLock(BaseLock):
    # No session could be started in time, or the session is not connected now.
    # NoAuthError: the server refuses this client's credentials (``auth``) for the
    # lock's nodes; to the purchase, a server it cannot use: nothing was taken.
    unavailable = (KazooTimeoutError, ConnectionLoss, SessionExpiredError, NoAuthError)

    def __init__(self, name: str, *, backend: ZooKeeperLockBackend, wait_timeout: float | None = None):
        super().__init__(name, wait_timeout=wait_timeout)
        self.backend = backend
        self.path = f"{backend.root}/{quote(name, safe='')}"
        self._recipe: CountingLock | None = None
        self._losses_at_acquire = 0

    # kazoo's recipe waits on a watch of the node before its own: no polling.
    def do_acquire(self, *, blocking: bool, timeout: float | None) -> bool:
        client = self.backend.client
        patience = min(self.backend.connect_timeout, float("inf") if timeout is None else timeout)
        if not self.backend.connected.wait(patience if blocking else 0):
            # Not connected (kazoo reconnects on its own: an ensemble's election takes
            # a second or two, which the wait above rides out): say so now, rather than
            # let the recipe retry until the wait timeout and answer "busy".
            raise ConnectionLoss(f"not connected to ZooKeeper (session {client.state})")
        if self._recipe is None:
            identifier = f"{os.getpid()}:{threading.get_ident()}"
            self._recipe = CountingLock(client, self.path, identifier=identifier)
        recipe = self._recipe
        losses = self.backend.losses
        try:
            # On a timeout kazoo deletes the waiter's node before raising.
            acquired: bool = recipe.acquire(blocking=blocking, timeout=timeout)
        except LockTimeout:
            acquired = False
        except KazooException:
            self._give_up(recipe)
            raise
        if acquired:
            self._losses_at_acquire = losses
        else:
            self._give_up(recipe)
        return acquired

    def _give_up(self, recipe: CountingLock) -> None:
        """After a failed acquisition: make sure no node of this contender stays,
        and take a fresh recipe (a fresh node prefix) for the next attempt."""
        self._recipe = None
        self.backend.forget_contender(recipe.path, recipe.prefix)

    def do_release(self) -> None:
        if self._recipe is None or not self._recipe.is_acquired:
            raise LockNotOwnedError("lock is not held by this lock object", lock_name=self.name)
        lost = self.backend.losses != self._losses_at_acquire
        try:
            self._recipe.release()  # a node already gone with its session is no error to kazoo
        except KazooException as e:
            self._recipe.is_acquired = False
            raise LockNotOwnedError(f"session lost before release: {e!r}", lock_name=self.name) from e
        if lost:
            raise LockNotOwnedError("the ZooKeeper connection was lost while the lock was held: "
                                    "someone else may have held it meanwhile", lock_name=self.name)

    def do_ensure_held(self) -> None:
        if self._recipe is None or not self._recipe.is_acquired:
            raise LockLostError("lock is not held", lock_name=self.name)
        state = self.backend.client.state
        if self.backend.losses != self._losses_at_acquire or state != KazooState.CONNECTED:
            raise LockLostError(f"ZooKeeper connection was {state} since the lock was taken",
                                lock_name=self.name)

    @property
    def fence(self) -> int | None:
        """The holder node's sequence number: ZooKeeper numbers the children of
        one parent in creation order, durably, so it serves as the token."""
        if self._recipe is None or not self._recipe.is_acquired:
            return None
        return int(self._recipe.node[-10:])  # kazoo names nodes <id>__lock__<10 digits>

    def locked(self) -> bool:
        try:
            return bool(self.backend.client.get_children(self.path))
        except NoNodeError:
            return False

    def contenders(self) -> int:
        """Nodes under the lock's path: the holder and its waiters."""
        try:
            return len(self.backend.client.get_children(self.path))
        except NoNodeError:
            return 0


class ZooKeeperLockBackend(BaseLockBackend):
    """OPTIONS: ``hosts`` ("127.0.0.1:2181"), ``root`` ("/locks"),
    ``session_timeout`` seconds (10), ``connect_timeout`` seconds (2: how long the
    first lock waits for a session before the server counts as unreachable),
    ``wait_timeout`` seconds, ``reconnect_max_s`` seconds (1: the longest wait between
    two tries to connect again), ``auth`` ("user:password", "" for none): the session
    authenticates with ZooKeeper's digest scheme, and every node it creates (the root,
    the locks, their contenders) is readable and writable by that user alone, so a
    client without the password can neither take nor remove a lock."""

    lock_class = ZooKeeperLock
    server = "zookeeper"

    def __init__(self, alias: str, options: dict[str, Any]):
        super().__init__(alias, options)
        self.hosts = self.options.pop("hosts", "127.0.0.1:2181")
        self.root = self.options.pop("root", "/locks").rstrip("/")
        self.session_timeout = float(self.options.pop("session_timeout", 10.0))
        self.connect_timeout = float(self.options.pop("connect_timeout", 2.0))
        self.reconnect_max_s = float(self.options.pop("reconnect_max_s", 1.0))
        self.auth = self.options.pop("auth", "")
        self._mutex = threading.Lock()
        self._client: KazooClient | None = None
        self._pid = os.getpid()
        # Bumped on every SUSPENDED or LOST: a holder compares it with the value it
        # saw when it acquired.
        self.losses = 0
        self.connected = threading.Event()  # set while the session is connected
        # (lock path, node prefix) of contenders that gave up while a delete of their
        # node could fail: deleted once connected again (see the module's docstring).
        self._strays: set[tuple[str, str]] = set()
        self._strays_mutex = threading.Lock()  # not _mutex: held while kazoo starts and calls _on_state
        atexit.register(self.close)

    @property
    def client(self) -> KazooClient:
        with self._mutex:
            if self._pid != os.getpid():  # a forked child: the parent's session is not ours
                self._client, self._pid, self.losses = None, os.getpid(), 0
                self.connected.clear()
            if self._client is None:
                # kazoo's own schedule of tries, without end, under a ceiling.
                retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=self.reconnect_max_s)
                client = KazooClient(hosts=self.hosts, timeout=self.session_timeout, connection_retry=retry,
                                     **self._credentials())
                client.add_listener(self._on_state)
                try:
                    client.start(timeout=self.connect_timeout)
                except KazooTimeoutError:
                    client.close()  # kazoo stopped it; its handler's threads go too
                    raise
                if client.connected:
                    self.connected.set()
                client.ensure_path(self.root)
                self._client = client
            return self._client

    def _credentials(self) -> dict[str, Any]:
        """The session's digest credentials and the ACL its nodes get ({}: none)."""
        if not self.auth:
            return {}
        user, _, password = self.auth.partition(":")
        return {"auth_data": [("digest", self.auth)],
                "default_acl": [make_digest_acl(user, password, all=True)]}

    def check(self, timeout: float) -> None:
        """The kept session's state, as kazoo's heartbeats last found it: no round
        trip of its own (the first check starts the session, within the connect
        timeout)."""
        self.client  # noqa: B018 (starts the session when none runs yet)
        if not self.connected.wait(timeout):
            raise ConnectionError(f"no ZooKeeper session with {self.hosts}")

    def _on_state(self, state: str) -> None:
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self.losses += 1
            self.connected.clear()
            if state == KazooState.LOST:
                with self._strays_mutex:
                    self._strays.clear()  # the session's ephemeral nodes went with it
        else:
            self.connected.set()
            with self._strays_mutex:
                strays = bool(self._strays)
            if strays and (client := self._client) is not None:
                # Not on kazoo's event thread: a request from there would wait on itself.
                client.handler.spawn(self._sweep, client)

    def forget_contender(self, path: str, prefix: str) -> None:
        """Delete the node(s) a contender that gave up may have left under ``path``;
        if that fails now, once the session is connected again."""
        with self._strays_mutex:
            self._strays.add((path, prefix))
        # kazoo's own flag, not ``connected``: kazoo fails the requests in flight
        # (this contender's among them) before it tells the listeners of the loss, and a
        # request made in between would wait for the next connection.
        if (client := self._client) is not None and client.connected:
            self._sweep(client)

    def _sweep(self, client: KazooClient) -> None:
        with self._strays_mutex:
            strays = list(self._strays)
        # A request answers or fails within the session timeout while connected; one
        # made just as the connection drops would wait for the next, so bound it.
        patience = self.session_timeout
        for path, prefix in strays:
            try:
                for node in client.get_children_async(path).get(timeout=patience):
                    if node.startswith(prefix):
                        client.delete_async(f"{path}/{node}").get(timeout=patience)
            except NoNodeError:
                pass
            except (KazooException, KazooTimeoutError):
                return  # cut off again: the next connection tries again
            with self._strays_mutex:
                self._strays.discard((path, prefix))

    def lock(self, name: str) -> ZooKeeperLock:
        return ZooKeeperLock(name, backend=self, wait_timeout=self.wait_timeout)

    def close(self) -> None:
        with self._mutex:
            client, self._client = self._client, None
        if client is not None and self._pid == os.getpid():
            client.stop()
            client.close()
