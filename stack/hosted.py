"""App instances on test hosts of their own (``stack.hosts``), each reaching its
servers over a link that a nemesis can cut:

    host db       a relay from its address to the stack's MariaDB (its Unix socket),
                  where the instances have a database of their own (``database``,
                  a copy of a migrated one, ``stack.migrated``; dropped as they stop): a cut link's
                  stalled transaction holds locks there, never in the stack's
    host redis    Redis servers of its own: the locks, idempotency flags and sale
                  states (6379; with ``clock``, on a wall clock the nemesis can step,
                  ``stack.clock``); the gate's stock and streams (6380)
    host redis2   with ``sentinel``: a replica of redis's 6379; with ``gate_replicas``
                  (not None), of its 6380 too; and
    (with ``gate_cluster``: the gate's Redis a Redis Cluster instead, a primary on
                  6380 of hosts redis, redis2 and redis3, each with a replica on 6381
                  of the next host round, so that no replica is beside its primary)
    host sentinel a Redis Sentinel watching those masters, which the instances ask
                  for each master (and which promotes redis2 when redis fails)
    host zk       with ``zookeeper``, a standalone ZooKeeper of its own (the
                  ``zookeeper`` strategy's lock: a JVM to start, which the other
                  strategies never use)
    host persist1 with ``gate`` (or a gate with replicas or a Cluster), a persister
                  of the gate's streams (``manage.py persist_orders``): a Django
                  process the other strategies' cells never use
    with ``payments``, for a sale with a payment window:
    host expire1  the expirer (``manage.py expire_orders``), its /metrics at its
                  address (the verdicts watch its batch in hand there)
    host pay      the payment provider's stand-in (``python -m payprovider``), its
                  webhooks to app1, as a provider's go to one endpoint
    host app1…    the flashsale app's server (flashsale.serve), as the stack runs it

The buyers, on this machine's namespace, reach each instance at its host's address.
The stack must be up (its MariaDB holds the sale); the hosts, their processes and
their links last as long as the ``HostedApps`` (they die with it, see
``stack.hosts``). A product is sold under the strategy its reset names, so one set
of instances serves every strategy.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import environ
import redis

from .clock import SteppedClock
from .config import ROOT, StackConfig
from .hosts import Host, Net
from .migrated import dropped, migrated_database
from .servers import (
    APP_DATABASE,
    app_database_url,
    binary,
    http_probe,
    payprovider_command,
    redis_client_probe,
    render,
    zookeeper_command,
    zookeeper_probe,
)

APP_PORT = 8001
REDIS_PORT = 6379
REDIS_GATE_PORT = 6380
REDIS_GATE_REPLICA_PORT = 6381  # a gate Cluster's replicas
GATE_CLUSTER_HOSTS = ("redis", "redis2", "redis3")
# A node counts as failing after 1 s without an answer (the stack's Cluster: 5 s).
GATE_CLUSTER_NODE_TIMEOUT_MS = 1000
ZK_PORT = 2181
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
PERSISTER = "persist1"  # its host, and its name as the gate's Redis knows it
EXPIRER = "expire1"
EXPIRER_METRICS_PORT = 9108
PAYPROVIDER = "pay"
PAYPROVIDER_PORT = 8070
# How long a server of the hosted stack may take to start before the stack gives up
# (with its logs): a wait, not a measure, so as long as the slowest machine needs.
STARTUP_S = 60


def until_ready(url: str, seconds: float) -> None:
    """Until the instance at ``url`` answers /readyz 200; TimeoutError after ``seconds``."""
    _until(http_probe(f"{url}/readyz"), seconds, f"{url} not ready")


def _until(probe: Callable[[], None], seconds: float, what: str) -> None:
    """Until ``probe`` returns without raising; TimeoutError after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return probe()
        except (OSError, redis.RedisError):  # urllib's errors are OSErrors
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} within {seconds:.0f} s") from None
        time.sleep(0.1)


class HostedApps:
    def __init__(self, config: StackConfig, *, instances: int = 2, section_delay_ms: float = 0.0,
                 fenced: bool = True, environment: Mapping[str, str] | Iterable[tuple[str, str]] = (),
                 sentinel: bool = False, clock: bool = False, gate_replicas: int | None = None,
                 gate_cluster: bool = False, payments: bool = False, expiry_pause_ms: float = 0.0,
                 zookeeper: bool = False, gate: bool = False):
        self.config = config
        self.instances = instances
        self.section_delay_ms = section_delay_ms
        self.environment = dict(environment)  # settings the instances read, over the stack's
        # False: the stock row's fencing stamp off (flashsale.settings.unfenced), for
        # the broken half of the verdicts' lesson on leases; never otherwise.
        self.fenced = fenced
        self.sentinel = sentinel  # a replica and a sentinel beside the locks' Redis
        # Not None: the gate's Redis with a replica, behind the sentinel, each purchase
        # waiting for this many replicas (FLASHSALE_GATE_REPLICAS); with 1 or more, its
        # servers refuse writes without a replica in sync (min-replicas-to-write).
        self.gate_replicas = gate_replicas
        self.gate_cluster = gate_cluster  # the gate's Redis a Cluster of three shards (its replicas too)
        # An expirer and the provider's stand-in, for sales with a payment window; the
        # expirer pausing ``expiry_pause_ms`` with a batch in hand (FLASHSALE_EXPIRY_PAUSE_MS).
        self.payments = payments
        self.expiry_pause_ms = expiry_pause_ms
        self.zookeeper = zookeeper
        # The gate sells here: its persister runs (a gate with replicas or a Cluster sells).
        self.gate = gate or gate_cluster or gate_replicas is not None
        self.net = Net()
        # Under the test_ prefix the app's user may create (stack.servers.mariadb_bootstrap).
        self.database = f"test_{APP_DATABASE}_hosted_{self.net.tag}"
        self.apps: list[Host] = []
        self._scratch = tempfile.TemporaryDirectory(prefix="flashsale-hosted-")
        # The locks' Redis on a wall clock the nemesis can step (stack.clock).
        self.clock = SteppedClock(Path(self._scratch.name)) if clock else None

    @property
    def buyer_auth(self) -> bool:
        """Whether the instances take the buyer from credentials (the stack's setting,
        unless ``environment`` says otherwise)."""
        said = self.environment.get("FLASHSALE_BUYER_AUTH")
        return self.config.buyer_auth if said is None else environ.Env.parse_value(said, bool)

    @property
    def urls(self) -> list[str]:
        return [f"http://{app.address}:{APP_PORT}" for app in self.apps]

    @property
    def db(self) -> Host:
        return self.net.hosts["db"]

    @property
    def redis(self) -> Host:
        return self.net.hosts["redis"]

    @property
    def zk(self) -> Host:
        return self.net.hosts["zk"]

    @property
    def persister(self) -> Host:
        return self.net.hosts[PERSISTER]

    @property
    def expirer(self) -> Host:
        return self.net.hosts[EXPIRER]

    @property
    def expirer_metrics(self) -> str:
        return f"http://{self.expirer.address}:{EXPIRER_METRICS_PORT}/metrics"

    def __enter__(self) -> HostedApps:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        self._database_made()
        self.net.open()
        db, redis_host, zk = self.net.host("db"), self.net.host("redis"), self.net.host("zk")
        if self.payments:  # made first: every process's settings name the provider's address
            self.net.host(EXPIRER), self.net.host(PAYPROVIDER)
        logs = Path(self._scratch.name)
        socket_path = self.config.run_dir / "mariadb" / "mysqld.sock"
        db.start([sys.executable, "-m", "stack.relay", f"{db.address}:{self.config.mysql_port}",
                  f"unix:{socket_path}"], cwd=ROOT, stdout=subprocess.DEVNULL,
                 stderr=(logs / "relay.log").open("w"))
        for port in (REDIS_PORT,) if self.gate_cluster else (REDIS_PORT, REDIS_GATE_PORT):
            stepped = self.clock is not None and port == REDIS_PORT
            redis_host.start(self._redis_server(redis_host, port, logs),
                             env={**os.environ, **self.clock.environment()} if stepped else None,
                             stdout=(logs / f"redis-{port}.log").open("w"), stderr=subprocess.STDOUT)
        if self._monitored():
            self._replicas_and_sentinel(logs)
        if self.gate_cluster:
            self._gate_cluster(logs)
        if self.zookeeper:
            (logs / "zk").mkdir()
            conf = render(ROOT / "stack/templates/zoo.cfg", logs / "zk" / "zoo.cfg", port=ZK_PORT,
                          data_dir=logs / "zk", members="", address=zk.address)
            log4j = render(ROOT / "stack/templates/log4j.properties", logs / "zk" / "log4j.properties")
            zk.start(zookeeper_command(conf, log4j), stdout=(logs / "zk.log").open("w"),
                     stderr=subprocess.STDOUT)
            self._until(zookeeper_probe(ZK_PORT, zk.address), STARTUP_S, "ZooKeeper not serving")
        if self.gate:
            persister = self.net.host(PERSISTER)
            persister.start([sys.executable, "manage.py", "persist_orders", f"--name={PERSISTER}"],
                            cwd=ROOT, env=self._environment(persister, selling=False),
                            stdout=(logs / "persister.log").open("w"), stderr=subprocess.STDOUT)
        for i in range(1, self.instances + 1):
            app = self.net.host(name := f"app{i}")
            self.apps.append(app)
            app.start([sys.executable, "-m", "flashsale.serve", f"--bind={app.address}:{APP_PORT}",
                       f"--name={name}", f"--workers={self.config.workers}",
                       f"--threads={self.config.threads}"],
                      cwd=ROOT, env=self._environment(app),
                      stdout=(logs / f"{name}.log").open("w"), stderr=subprocess.STDOUT)
        if self.payments:
            self._payments(logs)  # after the instances: the provider's webhooks go to app1
        for url in self.urls:
            self._until(http_probe(f"{url}/readyz"), STARTUP_S, f"{url} not ready")
        if self.gate:
            self._until(self._persister_connected, STARTUP_S,
                        "the persister not connected to the gate's Redis")
        if self.payments:
            self._until(http_probe(self.expirer_metrics), STARTUP_S, "the expirer not serving /metrics")

    def _payments(self, logs: Path) -> None:
        """The expirer and the provider's stand-in (whose address the instances'
        settings name: ``_environment``), on hosts of their own."""
        expirer, pay = self.expirer, self.net.hosts[PAYPROVIDER]
        env = {k: v for k, v in self._environment(expirer).items() if k != "PROMETHEUS_MULTIPROC_DIR"}
        expirer.start([sys.executable, "manage.py", "expire_orders", f"--metrics-port={EXPIRER_METRICS_PORT}",
                       f"--metrics-address={expirer.address}"], cwd=ROOT,
                      env={**env, "FLASHSALE_EXPIRY_PAUSE_MS": str(self.expiry_pause_ms)},
                      stdout=(logs / "expirer.log").open("w"), stderr=subprocess.STDOUT)
        pay.start(payprovider_command(self.config, port=PAYPROVIDER_PORT, webhooks_to=self.urls[0],
                                      host=pay.address),
                  cwd=ROOT, env={k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")},
                  stdout=(logs / "payprovider.log").open("w"), stderr=subprocess.STDOUT)

    def _persister_connected(self) -> None:
        """The persister connected to the gate's Redis (to one of a Cluster's primaries)."""
        hosts = [self.net.hosts[name] for name in GATE_CLUSTER_HOSTS] if self.gate_cluster else [self.redis]
        failures = []
        for host in hosts:
            try:
                return redis_client_probe(REDIS_GATE_PORT, PERSISTER, host.address)()
            except ConnectionError as e:
                failures.append(e)
        raise failures[-1]

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
                self._until(lambda h=host, p=port: redis.Redis(host=h.address, port=p,
                                                               socket_timeout=1).ping(),
                            STARTUP_S, "a gate node not answering")
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

    def gate_primaries(self) -> list[Host]:
        """The hosts of the gate's primaries (on REDIS_GATE_PORT) as made: a Cluster's
        three, or the one the sentinel names."""
        if self.gate_cluster:
            return [self.net.hosts[name] for name in GATE_CLUSTER_HOSTS]
        return [self.master(GATE_SENTINEL_SERVICE)]

    def gate_shard(self, key: str) -> tuple[Host, Host]:
        """The hosts of the primary holding the gate's ``key`` (its Cluster shard's, or
        the sentinel's master) and of its replica."""
        if not self.gate_cluster:
            master = self.master(GATE_SENTINEL_SERVICE)
            return master, next(h for h in self.net.hosts.values()
                                if h.name in ("redis", "redis2") and h is not master)
        hosts = {self.net.hosts[name].address: self.net.hosts[name] for name in GATE_CLUSTER_HOSTS}
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
            [(REDIS_GATE_PORT, GATE_SENTINEL_SERVICE)] if self._gate_behind_sentinel else [])

    @property
    def _gate_behind_sentinel(self) -> bool:
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

    def log_tail(self, name: str, lines: int = 30) -> str:
        """The last ``lines`` of a server's log (``sentinel``, ``app1``, …): what a failed
        assertion about that server shows."""
        log = Path(self._scratch.name) / f"{name}.log"
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""

    def master(self, service: str = SENTINEL_SERVICE) -> Host:
        """The host of ``service``'s master (the locks' Redis by default), as the
        sentinel names it now."""
        sentinel = self.net.hosts["sentinel"]
        with redis.Redis(host=sentinel.address, port=SENTINEL_PORT, socket_timeout=1,
                         decode_responses=True) as asked:
            address, _ = asked.sentinel_get_master_addr_by_name(service)
        return next(host for host in self.net.hosts.values() if host.address == address)

    def _environment(self, host: Host, *, selling: bool = True) -> dict[str, str]:
        """An instance's settings, reaching every server on its host; without
        ``selling``, a persister's (``StackConfig.persister_environment``)."""
        stack = (self.config.app_environment if selling else self.config.persister_environment)(host.name)
        return {
            **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")},
            **stack,
            **({} if self.fenced else {"DJANGO_SETTINGS_MODULE": "flashsale.settings.unfenced"}),
            "DATABASE_URL": self._database_url(self.db.address),
            "REDIS_URL": f"redis://{self.redis.address}:{REDIS_PORT}/0",
            "FLASHSALE_GATE_REDIS_URL": f"redis://{self.redis.address}:{REDIS_GATE_PORT}/0",
            "ZOOKEEPER_HOSTS": f"{self.zk.address}:{ZK_PORT}",
            **({"REDIS_SENTINELS": self._sentinel_address(),
                "REDIS_SENTINEL_SERVICE": SENTINEL_SERVICE} if self.sentinel else {}),
            **({"FLASHSALE_GATE_REDIS_SENTINELS": self._sentinel_address(),
                "FLASHSALE_GATE_REDIS_SENTINEL_SERVICE": GATE_SENTINEL_SERVICE}
               if self._gate_behind_sentinel else {}),
            **({"FLASHSALE_GATE_REDIS_CLUSTER": "true"} if self.gate_cluster else {}),
            **({"FLASHSALE_GATE_REPLICAS": str(self.gate_replicas)}
               if self.gate_replicas is not None else {}),
            **({"FLASHSALE_PAYMENTS_API_BASE": self.provider_url}
               if self.payments else {}),
            **({"DJANGO_ALLOWED_HOSTS": host.address,
                "FLASHSALE_STRATEGY": "atomic",  # what /readyz probes; each product names its own
                "FLASHSALE_SECTION_DELAY_MS": str(self.section_delay_ms),
                "FLASHSALE_METRICS": "false",
                "PROMETHEUS_MULTIPROC_DIR": str(Path(self._scratch.name) / f"metrics-{host.name}")}
               if selling else {}),
            **self.environment,
        }

    @property
    def provider_url(self) -> str:
        """The payment provider's stand-in, with ``payments``: its base URL."""
        return f"http://{self.net.hosts[PAYPROVIDER].address}:{PAYPROVIDER_PORT}"

    @property
    def database_url(self) -> str:
        """The instances' database, as this machine reaches it (its loopback port)."""
        return self._database_url("127.0.0.1")

    def _sentinel_address(self) -> str:
        return f"{self.net.hosts['sentinel'].address}:{SENTINEL_PORT}"

    def _until(self, probe: Callable[[], None], seconds: float, what: str) -> None:
        try:
            _until(probe, seconds, what)
        except TimeoutError as e:
            logs = "\n".join(p.read_text()[-2000:] for p in Path(self._scratch.name).glob("*.log"))
            raise RuntimeError(f"{e}:\n{logs}") from None

    def _database_url(self, host: str) -> str:
        """The instances' database, reached at ``host`` on the stack's MariaDB port."""
        return app_database_url(self.config, self.database, host)

    def _database_made(self) -> None:
        """The instances' database, migrated (a copy of this process's migrated template)."""
        migrated_database(self.config, self.database)

    def close(self) -> None:
        self.net.close()
        self._scratch.cleanup()
        dropped(self.config, self.database)
