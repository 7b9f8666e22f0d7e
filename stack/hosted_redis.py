"""The Redis servers of test hosts (``stack.hosted``): on host redis the locks' (6379)
and the gate's (6380); with a sentinel, a replica of either on host redis2 and a
Redis Sentinel on host sentinel that promotes it; with a Cluster, the gate's Redis on
hosts redis, redis2 and redis3, each a primary and the next one's replica. Where each
primary is now, the sentinel or the Cluster says (``master``, ``gate_shard``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from functools import partial
from pathlib import Path

import redis

from .clock import SteppedClock
from .hosts import Host, Net
from .servers import binary

REDIS_PORT = 6379
REDIS_GATE_PORT = 6380
REDIS_GATE_REPLICA_PORT = 6381  # a gate Cluster's replicas
GATE_CLUSTER_HOSTS = ("redis", "redis2", "redis3")
# A node counts as failing after 1 s without an answer (the stack's Cluster: 5 s).
GATE_CLUSTER_NODE_TIMEOUT_MS = 1000
SENTINEL_PORT = 26379
SENTINEL_SERVICE = "flashsale"
GATE_SENTINEL_SERVICE = "flashsale-gate"
SENTINEL_CONF = """port {port}
bind {address}
protected-mode no
dir {dir}
"""
# The master counts as down after 1 s without an answer; one sentinel is a quorum.
SENTINEL_MONITOR = """sentinel monitor {service} {master} {master_port} 1
sentinel down-after-milliseconds {service} 1000
sentinel failover-timeout {service} 5000
"""
# How long a server of the hosted stack may take to start before the stack gives up
# (with its logs): a wait, not a measure, so as long as the slowest machine needs.
STARTUP_S = 60


def _pinged(host: Host, port: int) -> None:
    redis.Redis(host=host.address, port=port, socket_timeout=1).ping()


class HostedRedis:
    """A ``HostedApps``' Redis servers on its ``net``, as its flags ask."""

    def __init__(self, net: Net, *, sentinel: bool, gate_replicas: int | None, gate_cluster: bool,
                 clock: SteppedClock | None, until: Callable[[Callable[[], None], float, str], None]):
        self.net = net
        self.sentinel = sentinel
        self.gate_replicas = gate_replicas
        self.gate_cluster = gate_cluster
        self.clock = clock
        self._until = until  # HostedApps': a timeout says what every server logged

    @property
    def redis(self) -> Host:
        return self.net.hosts["redis"]

    def start(self, logs: Path) -> None:
        """The servers up and, with replicas, in sync: their logs and data in ``logs``."""
        redis_host = self.redis  # made by HostedApps.start, among its first hosts
        for port in (REDIS_PORT,) if self.gate_cluster else (REDIS_PORT, REDIS_GATE_PORT):
            stepped = self.clock.environment() if self.clock is not None and port == REDIS_PORT else None
            redis_host.start(self._redis_server(redis_host, port, logs),
                             env={**os.environ, **stepped} if stepped is not None else None,
                             stdout=(logs / f"redis-{port}.log").open("w"), stderr=subprocess.STDOUT)
        if self._monitored():
            self._replicas_and_sentinel(logs)
        if self.gate_cluster:
            self._gate_cluster(logs)

    def _gate_cluster(self, logs: Path) -> None:
        """The gate's Redis Cluster: three primaries, each host's replica following the
        next host's primary, made with redis-cli as an operator would."""
        hosts = [self.redis, self.net.host("redis2"), self.net.host("redis3")]
        cluster = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                   "--cluster-node-timeout", str(GATE_CLUSTER_NODE_TIMEOUT_MS))
        for host in hosts:
            for port in (REDIS_GATE_PORT, REDIS_GATE_REPLICA_PORT):
                (logs / f"{host.name}-{port}").mkdir()
                host.start(self._redis_server(host, port, logs / f"{host.name}-{port}", *cluster),
                           stdout=(logs / f"{host.name}-{port}.log").open("w"), stderr=subprocess.STDOUT)
        # Both nodes of each host answering before the cluster is made of them: each
        # starts on its own, and the create meets the primaries first.
        for host in hosts:
            for port in (REDIS_GATE_PORT, REDIS_GATE_REPLICA_PORT):
                self._until(partial(_pinged, host, port), STARTUP_S, "a gate node not answering")
        self._redis_cli("--cluster", "create", *(f"{h.address}:{REDIS_GATE_PORT}" for h in hosts),
                        "--cluster-yes")
        for i, host in enumerate(hosts):
            primary = hosts[(i + 1) % len(hosts)]
            primary_id = redis.Redis(host=primary.address, port=REDIS_GATE_PORT).cluster("myid")
            self._redis_cli("--cluster", "add-node", f"{host.address}:{REDIS_GATE_REPLICA_PORT}",
                            f"{primary.address}:{REDIS_GATE_PORT}", "--cluster-slave",
                            "--cluster-master-id", primary_id if isinstance(primary_id, str)
                            else primary_id.decode())

        def in_step() -> None:
            for host in hosts:
                with redis.Redis(host=host.address, port=REDIS_GATE_PORT, socket_timeout=1,
                                 decode_responses=True) as node:
                    if node.cluster("info")["cluster_state"] != "ok":
                        raise ConnectionError(f"{host.name}: the cluster is not ok yet")
                    if node.info("replication").get("slave0", {}).get("state") != "online":
                        raise ConnectionError(f"{host.name}: its replica is not online yet")

        self._until(in_step, STARTUP_S, "the gate's Cluster not in step")

    def _redis_cli(self, *args: str) -> None:
        done = subprocess.run([binary("redis-cli"), *args], capture_output=True, text=True, timeout=60)
        if done.returncode:
            raise RuntimeError(f"redis-cli {' '.join(args[:2])} failed:\n{done.stdout}{done.stderr}")

    def gate_started_on(self) -> list[Host]:
        """The hosts the gate's primaries (on REDIS_GATE_PORT) were started on, before
        any failover: a Cluster's three, or host redis."""
        if self.gate_cluster:
            return [self.net.hosts[name] for name in GATE_CLUSTER_HOSTS]
        return [self.redis]

    def gate_primaries(self) -> list[Host]:
        """The hosts of the gate's primaries (on REDIS_GATE_PORT) as made: a Cluster's
        three, or the one the sentinel names."""
        if self.gate_cluster:
            return self.gate_started_on()
        return [self.master(GATE_SENTINEL_SERVICE)]

    def gate_shard(self, key: str) -> tuple[Host, Host]:
        """The hosts of the primary holding the gate's ``key`` (its Cluster shard's, or
        the sentinel's master) and of its replica."""
        if not self.gate_cluster:
            master = self.master(GATE_SENTINEL_SERVICE)
            return master, next(h for h in self.net.hosts.values()
                                if h.name in ("redis", "redis2") and h is not master)
        hosts = {host.address: host for host in self.gate_started_on()}
        with redis.Redis(host=self.redis.address, port=REDIS_GATE_PORT, socket_timeout=1,
                         decode_responses=True) as node:
            slot = node.cluster("keyslot", key)
            layout = node.execute_command("CLUSTER", "SLOTS")
        for first, last, primary, *_ in layout:
            if first <= slot <= last:
                # Its replica as it says (the others may not have heard of it yet).
                with redis.Redis(host=primary[0], port=primary[1], socket_timeout=1,
                                 decode_responses=True) as node:
                    replica = node.info("replication")["slave0"]["ip"]
                return hosts[primary[0]], hosts[replica]
        raise RuntimeError(f"no primary holds the slot of {key}")

    def _redis_server(self, host: Host, port: int, logs: Path, *args: str) -> list[str]:
        """A Redis server's command line on ``host``: no persistence (the hosts are a
        test's), a replica's first copy sent at once (not after the 5 s Redis waits by
        default for others to share it); the gate's refuses writes without a replica
        in sync if asked to."""
        waited = port in (REDIS_GATE_PORT, REDIS_GATE_REPLICA_PORT) and (self.gate_replicas or 0) > 0
        return [binary("redis-server"), "--bind", host.address, "--port", str(port), "--save", "",
                "--appendonly", "no", "--protected-mode", "no", "--dir", str(logs),
                "--repl-diskless-sync-delay", "0",
                *(("--min-replicas-to-write", str(self.gate_replicas), "--min-replicas-max-lag", "1")
                  if waited else ()), *args]

    def _monitored(self) -> list[tuple[int, str]]:
        """The Redis servers the sentinel watches, each with a replica: (port, service)."""
        return ([(REDIS_PORT, SENTINEL_SERVICE)] if self.sentinel else []) + (
            [(REDIS_GATE_PORT, GATE_SENTINEL_SERVICE)] if self.gate_behind_sentinel else [])

    @property
    def gate_behind_sentinel(self) -> bool:
        return self.gate_replicas is not None and not self.gate_cluster

    def _replicas_and_sentinel(self, logs: Path) -> None:
        replica, sentinel = self.net.host("redis2"), self.net.host("sentinel")
        for port, _ in self._monitored():
            following = ("--replicaof", self.redis.address, str(port))
            replica.start(self._redis_server(replica, port, logs, *following),
                          stdout=(logs / f"redis2-{port}.log").open("w"), stderr=subprocess.STDOUT)
        conf = logs / "sentinel.conf"  # Sentinel rewrites it as it learns: in the scratch directory
        master = self.redis.address
        monitors = "".join(SENTINEL_MONITOR.format(service=service, master=master, master_port=port)
                           for port, service in self._monitored())
        conf.write_text(SENTINEL_CONF.format(port=SENTINEL_PORT, address=sentinel.address, dir=logs)
                        + monitors)
        sentinel.start([binary("redis-server"), str(conf), "--sentinel"],
                       stdout=(logs / "sentinel.log").open("w"), stderr=subprocess.STDOUT)

        def replicas_known() -> None:
            with redis.Redis(host=sentinel.address, port=SENTINEL_PORT, socket_timeout=1,
                             socket_connect_timeout=1, decode_responses=True) as asked:
                for _, service in self._monitored():
                    if not any(r.get("master-link-status") == "ok" for r in asked.sentinel_slaves(service)):
                        raise ConnectionError(f"the sentinel knows no replica of {service} in sync yet")

        self._until(replicas_known, STARTUP_S, "no replica in sync")

    def master(self, service: str = SENTINEL_SERVICE) -> Host:
        """The host of ``service``'s master (the locks' Redis by default), as the
        sentinel names it now."""
        sentinel = self.net.hosts["sentinel"]
        with redis.Redis(host=sentinel.address, port=SENTINEL_PORT, socket_timeout=1,
                         decode_responses=True) as asked:
            address, _ = asked.sentinel_get_master_addr_by_name(service)
        return next(host for host in self.net.hosts.values() if host.address == address)

    def sentinel_address(self) -> str:
        return f"{self.net.hosts['sentinel'].address}:{SENTINEL_PORT}"
