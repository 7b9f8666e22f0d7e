"""Release notifications for waiting lockers: one pub/sub connection per process,
shared by every waiter, one channel per lock while anyone waits on it.

A message is ``ANYONE``, ``EVERYONE`` or the name of one waiter (its holder name).
``ANYONE`` wakes one waiter of this process (a semaphore permit, as Redisson's
LockPubSub does), so a release does not stampede every local waiter into Redis.
``EVERYONE`` wakes them all: a read-write lock that becomes readable lets every
waiting reader in at once (Redisson's READ_UNLOCK_MESSAGE).
A name wakes that waiter only, in whichever process it waits: the fair lock's
release wakes the first in line and nobody else. A waiter that misses a message
(Redis restarted, a race with the subscription) still wakes when its own bound
runs out (the lock's TTL, or the fair lock's next ask).

A channel may be one process's own, with a :class:`Listing`: ``redisson`` lists the
processes that wait for a lock in Redis, and its release wakes one of them, so one
waiter in all wakes instead of one per process. The process joins the list once its
channel is subscribed (a release that picks it is then heard), leaves it before it
unsubscribes, and passes on a message that finds nobody left waiting.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis
from redis.client import PubSub

logger = logging.getLogger(__name__)

# How long a new waiter waits for Redis to confirm its subscription. Past it the
# waiter goes on; a message it misses costs it at most one TTL.
SUBSCRIBE_CONFIRM_TIMEOUT = 1.0

ANYONE = b"0"
EVERYONE = b"*"


@dataclass(frozen=True)
class Listing:
    """What a process does about a list of the processes waiting on a channel:
    ``join`` (idempotent), ``leave``, and ``forward``: wake another, for a message
    this process received with nobody left to wake."""

    join: Callable[[], None]
    leave: Callable[[], None]
    forward: Callable[[], None]


class Subscription:
    """This process's waiters on one channel."""

    def __init__(self, listing: Listing | None = None):
        self.waiters = 0
        self.confirmed = threading.Event()
        self.listing = listing
        self.listed = False
        self._joining = threading.Lock()
        self._permits = threading.Semaphore(0)
        self._addressed: dict[bytes, threading.Semaphore] = {}

    def expect(self, address: str) -> None:
        self._addressed[address.encode()] = threading.Semaphore(0)

    def forget(self, address: str) -> None:
        self._addressed.pop(address.encode(), None)

    def deliver(self, message: bytes) -> None:
        if message == ANYONE:
            self._permits.release()
        elif message == EVERYONE:
            # One permit per waiter; one that is between two asks wakes early once.
            self._permits.release(max(self.waiters, 1))
        elif (permit := self._addressed.get(message)) is not None:
            permit.release()

    def join(self) -> None:
        """List this process, once (its first waiter does, when subscribed)."""
        if self.listing is None or self.listed:
            return
        with self._joining:
            if not self.listed:
                self.listing.join()
                self.listed = True

    def woken_unheard(self) -> bool:
        """A message came that no waiter took (its last waiter is leaving)."""
        return self._permits.acquire(blocking=False)

    def wait(self, timeout: float, address: str | None = None) -> bool:
        """Sleep until a message for anyone (or, given ``address``, for that waiter
        only) or ``timeout``; True if woken by a message."""
        permits = self._permits if address is None else self._addressed[address.encode()]
        return permits.acquire(timeout=max(timeout, 0))


class Wakeups:
    """
    :param standing_channel: subscribed for as long as the process listens, and
        published to by no one. While a redis-py PubSub has no subscription its
        ``subscribe()`` may read from the connection itself (health-check
        replies), racing the listener thread; with this one it never has none,
        and only the listener reads.
    """

    def __init__(self, client: redis.Redis, standing_channel: str):
        self.client = client
        self.standing_channel = standing_channel
        self._mutex = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        # Also after a fork: the parent's listener thread and connection are not ours.
        self._pid = os.getpid()
        self._pubsub: redis.client.PubSub | None = None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._subscriptions: dict[str, Subscription] = {}
        # Per listed channel, how to pass on a message that arrives once its last
        # waiter has left (kept: one entry per lock name this process waited on).
        self._forwards: dict[str, Callable[[], None]] = {}

    @contextmanager
    def subscribed(self, channel: str, address: str | None = None,
                   listing: Listing | None = None) -> Iterator[Subscription]:
        """Hold a subscription to ``channel`` for the duration of one wait; with
        ``address``, messages naming it are kept for this waiter; with ``listing``,
        the channel is this process's own and the process is listed while it waits."""
        sub = self._enter(channel, address, listing)
        try:
            sub.confirmed.wait(SUBSCRIBE_CONFIRM_TIMEOUT)
            sub.join()
            yield sub
        finally:
            self._leave(channel, sub, address)

    def _enter(self, channel: str, address: str | None, listing: Listing | None = None) -> Subscription:
        with self._mutex:
            if self._pid != os.getpid():
                self._reset()
            if self._pubsub is None:
                self._pubsub = self.client.pubsub()
                self._pubsub.subscribe(self.standing_channel)
            pubsub = self._pubsub
            sub = self._subscriptions.get(channel)
            if sub is None:
                sub = self._subscriptions[channel] = Subscription(listing)
                if listing is not None:
                    self._forwards[channel] = listing.forward
                pubsub.subscribe(channel)
            sub.waiters += 1
            if address is not None:
                sub.expect(address)
            if self._thread is None:
                self._thread = threading.Thread(target=self._listen, args=(pubsub, self._stopped),
                                                name="lock-wakeups", daemon=True)
                self._thread.start()
            return sub

    def _leave(self, channel: str, sub: Subscription, address: str | None) -> None:
        with self._mutex:
            if address is not None:
                sub.forget(address)
            sub.waiters -= 1
            if sub.waiters == 0 and self._subscriptions.get(channel) is sub:
                del self._subscriptions[channel]
                if sub.listed and sub.listing is not None:
                    # Off the list first: a release then no longer picks this process.
                    # If this fails, the first release that finds nobody listening
                    # here drops it (wake_one.lua).
                    self._quietly(sub.listing.leave, f"leaving the waiting list of {channel}")
                assert self._pubsub is not None  # set while any channel is subscribed
                try:
                    self._pubsub.unsubscribe(channel)
                except redis.RedisError as e:  # the listener's reconnect resubscribes what is left
                    logger.warning("unsubscribe from %s failed: %s", channel, e)
            else:
                return
        if sub.listing is not None and sub.woken_unheard():
            self._quietly(sub.listing.forward, f"passing on a wake-up of {channel}")

    @staticmethod
    def _quietly(step: Callable[[], None], what: str) -> None:
        try:
            step()
        except redis.RedisError as e:  # the waiters' own bounds (the lock's TTL) remain
            logger.warning("%s failed: %s", what, e)

    def close(self) -> None:
        """Stop listening (the backend is closing its client)."""
        with self._mutex:
            self._stopped.set()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=2)
        with self._mutex:
            if self._pubsub is not None:
                self._pubsub.close()
            self._reset()

    def _listen(self, pubsub: PubSub, stopped: threading.Event) -> None:
        while not stopped.is_set():
            try:
                message = pubsub.get_message(timeout=0.5)
            except Exception as e:
                # Never let the listener die: redis-py reconnects and resubscribes
                # on the next call, and waiters meanwhile fall back to their TTL.
                logger.warning("lock wake-up channel lost: %s", e)
                stopped.wait(0.5)
                continue
            if message is None:
                continue
            channel = message["channel"].decode()
            with self._mutex:
                sub = self._subscriptions.get(channel)
                forward = self._forwards.get(channel)
            if sub is None:
                if message["type"] == "message" and forward is not None:
                    self._quietly(forward, f"passing on a wake-up of {channel}")
                continue
            if message["type"] == "subscribe":
                sub.confirmed.set()
            elif message["type"] == "message":
                sub.deliver(message["data"])

    def subscriber_count(self) -> int:
        """Channels this process is subscribed to right now (for tests and figures)."""
        with self._mutex:
            return len(self._subscriptions)
