"""Throwaway redis-server processes, for what needs more than the stack's one Redis:
a master with a replica (scenario S10), independent masters (RedLock) and a Redis
Cluster (the gate's keys spread over slots).

Each runs on a free loopback port in a temporary directory, without persistence,
as this process's child; it is stopped by its PID and its directory removed.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

from .servers import StackError, binary, tail


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


BUS = 10_000  # a Cluster node's bus port is its port plus this, at most 65,535


def ephemeral_ports() -> range:
    """The ports the kernel hands out to outgoing connections (Linux's default if it
    does not say)."""
    try:
        low, high = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32_768, 60_999
    return range(low, high + 1)


def free_cluster_port(ephemeral: range | None = None) -> int:
    """A free port whose cluster bus port is free too, both outside the ports the
    kernel hands out to outgoing connections: a bus port in that range, free when
    looked at, was taken by one of the suite's connections before Redis bound it
    ("Address already in use"). Anywhere from 20,000 if that range leaves no room."""
    ephemeral = ephemeral_ports() if ephemeral is None else ephemeral
    # From 10,000 up: the stacks' own ports are below, and a server of theirs a test
    # restarts must find its port free again.
    outside = [port for port in range(10_000, 65_536 - BUS)
               if port not in ephemeral and port + BUS not in ephemeral]
    while True:
        port = random.choice(outside) if outside else random.randint(20_000, 65_535 - BUS)
        if _bindable(port) and _bindable(port + BUS):
            return port


@dataclass
class ScratchRedis:
    port: int
    process: subprocess.Popen
    dir: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, **options) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=2, socket_connect_timeout=1, **options)

    def crash(self) -> None:
        """SIGKILL: the server is gone with whatever it had not passed on."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(5)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.crash()
        shutil.rmtree(self.dir, ignore_errors=True)


def replica_in_step(primary: redis.Redis) -> bool:
    """Whether ``primary``'s replica acknowledged all it wrote. A replica online after
    its sync gets the stream only after its first acknowledgement (within a second):
    until then a WAIT counts it out."""
    replication = primary.info("replication")
    return replication.get("slave0", {}).get("offset", -1) == replication["master_repl_offset"]


def start_redis(*args: str, port: int | None = None, environment: Mapping[str, str] = {}) -> ScratchRedis:
    """Start a redis-server (extra ``args`` as on its command line; ``environment``
    added to this process's) and wait until it answers; a restart on the same
    ``port`` starts empty, as after a crash."""
    port = port or free_port()
    directory = Path(tempfile.mkdtemp(prefix=f"flashsale-redis-{port}-"))
    log = directory / "redis.log"
    command = [binary("redis-server"), "--bind", "127.0.0.1", "--port", str(port), "--save", "",
               "--appendonly", "no", "--dir", str(directory), "--logfile", str(log),
               # A replica's first sync starts at once (Redis waits 5 s for more replicas).
               "--repl-diskless-sync-delay", "0", *args]
    server = ScratchRedis(port, subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                 env={**os.environ, **environment}), directory)
    deadline = time.monotonic() + 10
    while True:
        try:
            server.client().ping()
            return server
        except redis.ConnectionError:
            if server.process.poll() is not None or time.monotonic() > deadline:
                why = tail(log)
                server.stop()
                raise StackError(f"scratch redis-server on port {port} failed to start\n{why}") from None
            time.sleep(0.02)


@contextmanager
def redis_servers(count: int, *args: str, pick_port: Callable[[], int] = free_port
                  ) -> Iterator[list[ScratchRedis]]:
    """``count`` independent redis-servers, stopped on the way out."""
    with ExitStack() as stack:
        servers = []
        for _ in range(count):
            server = start_redis(*args, port=pick_port())
            stack.callback(server.stop)
            servers.append(server)
        yield servers


@contextmanager
def redis_cluster(masters: int = 3, *, replicas: int = 0, options: tuple[str, ...] = ()
                  ) -> Iterator[list[ScratchRedis]]:
    """A Redis Cluster of ``masters`` masters, each with ``replicas`` replicas, on
    loopback, made with ``redis-cli --cluster create`` (the masters first in the
    list); ``options``: more of each server's command line. Every server stopped on the
    way out."""
    with redis_servers(masters * (1 + replicas), "--cluster-enabled", "yes",
                       "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000", *options,
                       pick_port=free_cluster_port) as servers:
        result = subprocess.run(
            [binary("redis-cli"), "--cluster", "create", *(f"127.0.0.1:{s.port}" for s in servers),
             "--cluster-replicas", str(replicas), "--cluster-yes"],
            capture_output=True, text=True, timeout=60)
        if result.returncode:
            raise StackError(f"redis-cli --cluster create failed:\n{result.stdout}{result.stderr}")
        deadline = time.monotonic() + 30
        while not all(s.client().cluster("info")["cluster_state"] == "ok" for s in servers):
            if time.monotonic() > deadline:
                raise StackError("the scratch Redis Cluster did not reach cluster_state:ok in 30 s")
            time.sleep(0.1)
        yield servers
