"""Where a scenario runs: the Redis it uses, under a key prefix of its own, and
backends of the project's locks built for it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from loadtest.client import FlashsaleClient, SignedUpBuyers
from locking.backends.redis.redisson import RedissonLockBackend
from locking.backends.redis.redisson_fair import RedissonFairLockBackend
from locking.backends.redis.redisson_rw import RedissonReadWriteLockBackend
from locking.backends.redis.setnx import SetnxLockBackend
from locking.backends.zookeeper import ZooKeeperLockBackend


@dataclass
class Context:
    redis_url: str
    zk_hosts: str = ""
    base_url: str = ""  # the stack behind nginx, for scenarios that buy through it
    admin_token: str = ""
    buyer_auth: bool = False  # the stack takes the buyer from credentials: its buyers sign up
    # apps(strategy=..., instances=..., ...) restarts the stack's app instances so
    # configured and returns a client for them; whoever provides it puts them back.
    apps: Callable[..., FlashsaleClient] | None = None
    prefix: str = field(default_factory=lambda: f"scenario:{uuid.uuid4().hex[:8]}:")

    def __post_init__(self):
        self.client = redis.Redis.from_url(self.redis_url)
        self._backends = []

    def key(self, name: str) -> str:
        return f"{self.prefix}{name}"

    # The project's locks keep their keys apart from the broken variants' (which a
    # scenario may leave behind on purpose).
    def setnx(self, **options) -> SetnxLockBackend:
        return self._redis(SetnxLockBackend, options)

    def redisson(self, **options) -> RedissonLockBackend:
        return self._redis(RedissonLockBackend, options)

    def redisson_fair(self, **options) -> RedissonFairLockBackend:
        return self._redis(RedissonFairLockBackend, options)

    def redisson_rw(self, **options) -> RedissonReadWriteLockBackend:
        return self._redis(RedissonReadWriteLockBackend, options)

    def _redis(self, backend_cls, options: dict):
        options = {"url": self.redis_url, "key_prefix": f"{self.prefix}fixed:", **options}
        return self._track(backend_cls("scenario", options))

    def zookeeper(self, backend_cls=ZooKeeperLockBackend, **options) -> ZooKeeperLockBackend:
        root = f"/scenarios/{self.prefix.split(':')[1]}"
        return self._track(backend_cls("scenario", {"hosts": self.zk_hosts, "root": root, **options}))

    def api(self) -> FlashsaleClient:
        return FlashsaleClient(self.base_url, admin_token=self.admin_token,
                               tokens=SignedUpBuyers(self.base_url) if self.buyer_auth else None)

    def _track(self, backend):
        self._backends.append(backend)
        return backend

    def close(self) -> None:
        """Drop the scenario's keys and backends."""
        keys = list(self.client.scan_iter(f"{self.prefix}*"))
        if keys:
            self.client.delete(*keys)
        for backend in self._backends:
            if isinstance(backend, ZooKeeperLockBackend) and backend._client is not None:
                backend.client.delete(backend.root, recursive=True)
            backend.close()
        self.client.close()
