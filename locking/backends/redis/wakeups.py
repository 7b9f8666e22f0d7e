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
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import redis

logger = logging.getLogger(__name__)

# How long a new waiter waits for Redis to confirm its subscription. Past it the
# waiter goes on; a message it misses costs it at most one TTL.
SUBSCRIBE_CONFIRM_TIMEOUT = 1.0

ANYONE = b"0"
EVERYONE = b"*"


class Subscription:
    """This process's waiters on one channel."""

    def __init__(self):
        self.waiters = 0
        self.confirmed = threading.Event()
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
        self._pubsub = None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._subscriptions: dict[str, Subscription] = {}

    @contextmanager
    def subscribed(self, channel: str, address: str | None = None) -> Iterator[Subscription]:
        """Hold a subscription to ``channel`` for the duration of one wait; with
        ``address``, messages naming it are kept for this waiter."""
        sub = self._enter(channel, address)
        try:
            sub.confirmed.wait(SUBSCRIBE_CONFIRM_TIMEOUT)
            yield sub
        finally:
            self._leave(channel, sub, address)

    def _enter(self, channel: str, address: str | None) -> Subscription:
        with self._mutex:
            if self._pid != os.getpid():
                self._reset()
            if self._pubsub is None:
                self._pubsub = self.client.pubsub()
                self._pubsub.subscribe(self.standing_channel)
            sub = self._subscriptions.get(channel)
            if sub is None:
                sub = self._subscriptions[channel] = Subscription()
                self._pubsub.subscribe(channel)
            sub.waiters += 1
            if address is not None:
                sub.expect(address)
            if self._thread is None:
                self._thread = threading.Thread(target=self._listen, args=(self._pubsub, self._stopped),
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
                try:
                    self._pubsub.unsubscribe(channel)
                except redis.RedisError as e:  # the listener's reconnect resubscribes what is left
                    logger.warning("unsubscribe from %s failed: %s", channel, e)

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

    def _listen(self, pubsub, stopped: threading.Event) -> None:
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
            if sub is None:
                continue
            if message["type"] == "subscribe":
                sub.confirmed.set()
            elif message["type"] == "message":
                sub.deliver(message["data"])

    def subscriber_count(self) -> int:
        """Channels this process is subscribed to right now (for tests and figures)."""
        with self._mutex:
            return len(self._subscriptions)
