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
from .hosted_redis import (
    GATE_SENTINEL_SERVICE,
    REDIS_GATE_PORT,
    REDIS_PORT,
    SENTINEL_SERVICE,
    STARTUP_S,
    HostedRedis,
)
from .hosts import Host, Net
from .migrated import dropped, migrated_database
from .servers import (
    APP_DATABASE,
    app_database_url,
    http_probe,
    payprovider_command,
    redis_client_probe,
    render,
    zookeeper_command,
    zookeeper_probe,
)

APP_PORT = 8001
ZK_PORT = 2181
PERSISTER = "persist1"  # its host, and its name as the gate's Redis knows it
EXPIRER = "expire1"
EXPIRER_METRICS_PORT = 9108
PAYPROVIDER = "pay"
PAYPROVIDER_PORT = 8070


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
        self.redis_servers = HostedRedis(self.net, sentinel=sentinel, gate_replicas=gate_replicas,
                                         gate_cluster=gate_cluster, clock=self.clock, until=self._until)

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
        return self.redis_servers.redis

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
        db, _, zk = self.net.host("db"), self.net.host("redis"), self.net.host("zk")
        if self.payments:  # made first: every process's settings name the provider's address
            self.net.host(EXPIRER), self.net.host(PAYPROVIDER)
        logs = Path(self._scratch.name)
        socket_path = self.config.run_dir / "mariadb" / "mysqld.sock"
        db.start([sys.executable, "-m", "stack.relay", f"{db.address}:{self.config.mysql_port}",
                  f"unix:{socket_path}"], cwd=ROOT, stdout=subprocess.DEVNULL,
                 stderr=(logs / "relay.log").open("w"))
        self.redis_servers.start(logs)
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
        failures = []
        for host in self.redis_servers.gate_started_on():
            try:
                return redis_client_probe(REDIS_GATE_PORT, PERSISTER, host.address)()
            except ConnectionError as e:
                failures.append(e)
        raise failures[-1]

    def master(self, service: str = SENTINEL_SERVICE) -> Host:
        return self.redis_servers.master(service)

    def gate_primaries(self) -> list[Host]:
        return self.redis_servers.gate_primaries()

    def gate_shard(self, key: str) -> tuple[Host, Host]:
        return self.redis_servers.gate_shard(key)

    def log_tail(self, name: str, lines: int = 30) -> str:
        """The last ``lines`` of a server's log (``sentinel``, ``app1``, …): what a failed
        assertion about that server shows."""
        log = Path(self._scratch.name) / f"{name}.log"
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""

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
            **({"REDIS_SENTINELS": self.redis_servers.sentinel_address(),
                "REDIS_SENTINEL_SERVICE": SENTINEL_SERVICE} if self.sentinel else {}),
            **({"FLASHSALE_GATE_REDIS_SENTINELS": self.redis_servers.sentinel_address(),
                "FLASHSALE_GATE_REDIS_SENTINEL_SERVICE": GATE_SENTINEL_SERVICE}
               if self.redis_servers.gate_behind_sentinel else {}),
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
