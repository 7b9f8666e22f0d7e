"""The local stack's configuration, read from the environment in this one place.

Every knob is an environment variable with the default below; the Django settings
read the same port variables, so apps, tests and tools agree without a second copy.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import environ

from flashsale.serve import ServeError, server_name

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # the virtualenv's bin/: gunicorn, supervisord

# Environment variables handed to every app instance as they are, when set; not the
# suite's own (a pytest part's pool, files): a part's change restarted every process.
APP_PASSTHROUGH_PREFIXES = ("FLASHSALE_", "DJANGO_", "DB_", "LOG_LEVEL", "MYSQL_ISOLATION_LEVEL")
SUITE_ONLY_PREFIX = "FLASHSALE_TEST_"
# What only the app instances' requests read (a purchase, a sign-up, the server): the
# processes beside the apps are not restarted when one of these changes.
REQUEST_KNOBS = frozenset({"FLASHSALE_SECTION_DELAY_MS", "FLASHSALE_SOLD_OUT_FAST_PATH", "FLASHSALE_SERVER",
                            "FLASHSALE_BUYER_AUTH", "FLASHSALE_THROTTLE_USER", "FLASHSALE_THROTTLE_ADDRESS",
                            "FLASHSALE_GATE_PIPELINE", "FLASHSALE_SIGN_UP_CHALLENGE_BITS"})


def owned_directory(path: Path) -> bool:
    """A directory (not a link to one) that this user owns."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


@dataclass(frozen=True)
class StackConfig:
    run_dir: Path
    mysql_port: int
    redis_port: int  # locks, idempotency flags, the sale's states, throttles, Django's cache
    redis_maxmemory: str  # evicts the least recently used key that has a TTL past this
    redis_gate_port: int  # the gate's stock and order streams, and nothing else
    redis_gate_maxmemory: str  # refuses new writes past this (noeviction): no order is evicted
    redis_appendfsync: str  # the locks' Redis's AOF fsync policy: everysec or always (or no)
    redis_gate_appendfsync: str  # the gate's: always, so that a crash takes back no 201
    zk_port: int
    zk_nodes: int  # 1: standalone; 3 (or any odd n): an ensemble on zk_port .. zk_port + n - 1
    nginx_port: int
    nginx_server_names: str  # the hosts nginx serves (space-separated); any other Host is 421
    nginx_purchase_rate: int  # purchases a second from one address before nginx answers 429
    nginx_read_rate: int  # every other request a second from one address, likewise
    nginx_show_upstream: bool  # X-Upstream: which instance answered (for watching the round robin)
    nginx_trusted_proxies: str  # addresses (CIDR) of a TLS terminator in front: the rates count its clients
    nginx_admin_allow: str  # addresses (CIDR) nginx serves the admin site (/admin/) to
    app_port: int  # first instance's port; instance i listens on app_port + i - 1
    metrics_port: int  # Prometheus; the exporters, nginx's status and the workers' /metrics above it
    instances: int
    persisters: int  # of the gate's streams (manage.py persist_orders)
    server: str  # the instances' request server (flashsale.serve): gunicorn or granian
    workers: int
    threads: int
    strategy: str
    section_delay_ms: float
    fast_path: bool  # the sold-out mark (FLASHSALE_SOLD_OUT_FAST_PATH)
    gate_pipeline: bool  # the gate's scripts sent together (FLASHSALE_GATE_PIPELINE)
    gate_replicas: int  # replicas a gate purchase waits for (FLASHSALE_GATE_REPLICAS); the stack runs none
    metrics: bool  # the apps count and time for /metrics (FLASHSALE_METRICS)
    buyer_auth: bool  # a purchase takes its buyer from credentials (FLASHSALE_BUYER_AUTH)
    # The payment provider's stand-in (payprovider): its port, and how it misbehaves.
    payprovider_port: int = 8070
    payprovider_duplicate: float = 0.1  # share of webhooks delivered twice
    payprovider_delay_ms: int = 200  # each delivery waits up to this: events overtake each other
    expiry_pause_ms: float = 0.0  # the expirer's pause with a batch in hand (the verdicts widen it)
    payment_grace_s: float = 5.0  # FLASHSALE_PAYMENT_GRACE_S, which a buyer racing the expirer needs
    payprovider_decline: float = 0.0  # share of payments declined whatever the card
    payprovider_workers: int = 4  # deliveries at once, as Stripe's: one alone queues them under load
    # A new buyer's proof of work (FLASHSALE_SIGN_UP_CHALLENGE_BITS): none, for the load tools.
    sign_up_challenge_bits: int = 0

    @classmethod
    def from_env(cls, environment: Mapping[str, str] | None = None) -> StackConfig:
        env = environ.Env()  # this process's environment, or ``environment`` ({}: the defaults)
        env.ENVIRON = os.environ if environment is None else environment  # type: ignore[assignment]
        try:
            server = server_name({"FLASHSALE_SERVER": env.str("FLASHSALE_SERVER", default="")})
        except ServeError as e:
            raise SystemExit(str(e)) from None
        config = cls(
            run_dir=Path(env.str("RUN_DIR", default=str(ROOT / ".run"))).resolve(),
            mysql_port=env.int("MYSQL_PORT", default=3310),
            redis_port=env.int("REDIS_PORT", default=6390),
            redis_maxmemory=env.str("REDIS_MAXMEMORY", default="512mb"),
            redis_gate_port=env.int("REDIS_GATE_PORT", default=env.int("REDIS_PORT", default=6390) + 1),
            redis_gate_maxmemory=env.str("REDIS_GATE_MAXMEMORY", default="1gb"),
            redis_appendfsync=env.str("REDIS_APPENDFSYNC", default="everysec"),
            redis_gate_appendfsync=env.str("REDIS_GATE_APPENDFSYNC", default="always"),
            zk_port=env.int("ZK_PORT", default=2190),
            zk_nodes=env.int("ZK_NODES", default=1),
            nginx_port=env.int("NGINX_PORT", default=8080),
            nginx_server_names=env.str("NGINX_SERVER_NAMES", default="127.0.0.1 localhost"),
            nginx_purchase_rate=env.int("NGINX_PURCHASE_RATE", default=10_000),
            nginx_read_rate=env.int("NGINX_READ_RATE", default=10_000),
            nginx_show_upstream=env.bool("NGINX_SHOW_UPSTREAM", default=False),
            nginx_trusted_proxies=env.str("NGINX_TRUSTED_PROXIES", default=""),
            nginx_admin_allow=env.str("NGINX_ADMIN_ALLOW", default="127.0.0.1 ::1"),
            app_port=env.int("APP_PORT", default=8001),
            metrics_port=env.int("METRICS_PORT", default=9390),
            instances=env.int("INSTANCES", default=2),
            persisters=env.int("PERSISTERS", default=2),
            server=server,
            workers=env.int("WORKERS", default=2),
            threads=env.int("THREADS", default=8),
            strategy=env.str("FLASHSALE_STRATEGY", default="atomic"),
            section_delay_ms=env.float("FLASHSALE_SECTION_DELAY_MS",
                                       default=env.float("FLASHSALE_RACE_DELAY_MS", default=0.0)),
            fast_path=env.bool("FLASHSALE_SOLD_OUT_FAST_PATH",
                               default=env.bool("FLASHSALE_SOLDOUT_FAST_PATH", default=True)),
            gate_pipeline=env.bool("FLASHSALE_GATE_PIPELINE", default=True),
            gate_replicas=env.int("FLASHSALE_GATE_REPLICAS", default=0),
            metrics=env.bool("FLASHSALE_METRICS", default=True),
            buyer_auth=env.bool("FLASHSALE_BUYER_AUTH", default=True),
            payprovider_port=env.int("PAYPROVIDER_PORT", default=8070),
            payprovider_duplicate=env.float("PAYPROVIDER_DUPLICATE", default=0.1),
            payprovider_delay_ms=env.int("PAYPROVIDER_DELAY_MS", default=200),
            expiry_pause_ms=env.float("FLASHSALE_EXPIRY_PAUSE_MS", default=0.0),
            payment_grace_s=env.float("FLASHSALE_PAYMENT_GRACE_S", default=5.0),
            payprovider_decline=env.float("PAYPROVIDER_DECLINE", default=0.0),
            payprovider_workers=env.int("PAYPROVIDER_WORKERS", default=4),
            sign_up_challenge_bits=env.int("FLASHSALE_SIGN_UP_CHALLENGE_BITS", default=0),
        )
        if min(config.nginx_purchase_rate, config.nginx_read_rate) < 1:
            raise SystemExit("NGINX_PURCHASE_RATE and NGINX_READ_RATE must be at least 1")
        if min(config.instances, config.payprovider_workers) < 1:
            raise SystemExit("INSTANCES and PAYPROVIDER_WORKERS must be at least 1")
        for name, policy in (("REDIS_APPENDFSYNC", config.redis_appendfsync),
                             ("REDIS_GATE_APPENDFSYNC", config.redis_gate_appendfsync)):
            if policy not in ("always", "everysec", "no"):
                raise SystemExit(f"{name} is always, everysec or no, not {policy!r}")
        return config

    def replace(self, **changes) -> StackConfig:
        return dataclasses.replace(self, **changes)

    # --- derived -------------------------------------------------------------

    @property
    def app_names(self) -> list[str]:
        return [f"app{i}" for i in range(1, self.instances + 1)]

    @property
    def persister_names(self) -> list[str]:
        return [f"persist{i}" for i in range(1, self.persisters + 1)]

    def app_port_of(self, name: str) -> int:
        return self.app_port + int(name.removeprefix("app")) - 1

    # Prometheus and what it scrapes besides the app instances, on loopback ports from
    # metrics_port up: Prometheus itself, the exporters of Redis, MariaDB and nginx,
    # nginx's stub_status, the race runner, then one port per persister; below it,
    # Alertmanager, the pager and the edge's exporter.
    @property
    def prometheus_port(self) -> int:
        return self.metrics_port

    @property
    def exporter_ports(self) -> dict[str, int]:
        base = self.metrics_port
        return {"redis": base + 1, "mysqld": base + 2, "nginx": base + 3, "edge": base - 3}

    # Below it: where the alerts go, Alertmanager, and the pager it notifies.
    @property
    def alertmanager_port(self) -> int:
        return self.metrics_port - 1

    @property
    def pager_port(self) -> int:
        return self.metrics_port - 2

    @property
    def nginx_status_port(self) -> int:
        return self.metrics_port + 4

    @property
    def racer_metrics_port(self) -> int:
        return self.metrics_port + 5

    def persister_metrics_port(self, name: str) -> int:
        return self.metrics_port + 5 + int(name.removeprefix("persist"))

    @property
    def expirer_metrics_port(self) -> int:
        return self.metrics_port + 6 + self.persisters

    @property
    def zk_hosts(self) -> str:
        return ",".join(f"127.0.0.1:{self.zk_port + i}" for i in range(self.zk_nodes))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.nginx_port}"

    def dir(self, *parts: str) -> Path:
        path = self.run_dir.joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def static_root(self) -> Path:
        """Where collectstatic writes and nginx reads: outside the checkout, because
        nginx's workers run as "nobody" when the stack runs as root, and a checkout
        under a 0700 home is closed to them."""
        return self.outside("static", mode=0o755)

    @property
    def docs_root(self) -> Path:
        """Where ``python -m stack docs`` builds the documentation site and nginx
        serves it at /docs/: outside the checkout, like the static files."""
        return self.outside("docs", mode=0o755)

    @property
    def metrics_root(self) -> Path:
        """Where the app instances' workers keep their metrics (prometheus-client's
        multiprocess files, a directory per instance): in memory where the machine
        has /dev/shm, since every counted answer writes to a memory-mapped file
        there."""
        shm = Path("/dev/shm")
        if shm.is_dir() and os.access(shm, os.W_OK):
            return self.outside("metrics", base=shm)
        return self.dir("metrics")

    @property
    def nginx_cache_root(self) -> Path:
        """nginx's cache of the product page: outside the checkout, like the static
        files. nginx makes the directory itself inside ours, and hands it to its workers."""
        return self.outside("nginx-cache", mode=0o755) / "products"

    @property
    def outside_records(self) -> Path:
        return self.run_dir / "outside"

    def outside(self, kind: str, *, base: Path | None = None, mode: int = 0o700) -> Path:
        """A directory of this stack's outside the checkout (in the system's temp dir
        unless ``base``), made by ``mkdtemp`` under a name nobody can guess and recorded
        in the run directory: on a shared host, another user cannot make it first,
        nor point a link where ours would be. Made once, the same for every process
        that reads the record; ``python -m stack clean`` removes it."""
        record = self.outside_records / kind
        if not record.exists():
            made = Path(tempfile.mkdtemp(prefix=f"flashsale-{kind}-", dir=base))
            made.chmod(mode)
            self.dir("outside")
            try:  # exclusive: of two processes making it at once, the first one's stays
                with open(record, "x") as f:
                    f.write(f"{made}\n")
            except FileExistsError:
                made.rmdir()
        path = Path(record.read_text().strip())
        if not owned_directory(path):
            # Gone (a reboot emptied /tmp) or not ours: make a new one.
            record.unlink(missing_ok=True)
            return self.outside(kind, base=base, mode=mode)
        return path

    @property
    def admin_token_file(self) -> Path:
        return self.run_dir / "admin-token"

    def admin_token(self) -> str:
        """FLASHSALE_ADMIN_TOKEN if set, else a token generated once for this stack."""
        return self._secret("FLASHSALE_ADMIN_TOKEN", self.admin_token_file, lambda: secrets.token_hex(16))

    def payments_api_key(self) -> str:
        """The key the apps pay with at the stand-in: generated once for this stack."""
        return self._secret("PAYPROVIDER_API_KEY", self.run_dir / "payments-key",
                            lambda: "sk_test_" + secrets.token_hex(16))

    def payments_webhook_secret(self) -> str:
        """What the stand-in signs its webhooks with and the apps check them against."""
        return self._secret("PAYPROVIDER_WEBHOOK_SECRET", self.run_dir / "webhook-secret",
                            lambda: "whsec_" + secrets.token_hex(24))

    def secret_key(self) -> str:
        """DJANGO_SECRET_KEY if set, else a key generated once for this stack."""
        return self._secret("DJANGO_SECRET_KEY", self.run_dir / "secret-key",
                            lambda: secrets.token_urlsafe(50))

    def _secret(self, variable: str, path: Path, new: Callable[[], str]) -> str:
        """The variable if set, else the file's, made with ``new()`` the first time.
        Made whole under another name and linked into place: of two processes that
        make it at once (the suite's parts start together), the first one's stays, and
        no reader sees it half written."""
        if value := os.environ.get(variable):
            return value
        if not path.exists():
            self.dir()
            made = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
            with os.fdopen(os.open(made, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                f.write(new() + "\n")
            try:
                os.link(made, path)
            except FileExistsError:
                pass
            finally:
                made.unlink()
        return path.read_text().strip()

    @property
    def released_file(self) -> Path:
        """The file this strategy's instances wait for before they sell (``orders.barrier``):
        the stack removes it before it starts them in place of another strategy's, and
        creates it once the last of those has stopped (``stack.control``)."""
        return self.dir("barrier") / f"released-{self.strategy}"

    def port_environment(self) -> dict[str, str]:
        """This stack's run directory and ports as the variables ``from_env`` reads: a
        process given them finds this stack's servers."""
        return {"RUN_DIR": str(self.run_dir), "MYSQL_PORT": str(self.mysql_port),
                "REDIS_PORT": str(self.redis_port), "REDIS_GATE_PORT": str(self.redis_gate_port),
                "ZK_PORT": str(self.zk_port), "NGINX_PORT": str(self.nginx_port),
                "APP_PORT": str(self.app_port), "METRICS_PORT": str(self.metrics_port),
                "PAYPROVIDER_PORT": str(self.payprovider_port)}

    def app_environment(self, name: str) -> dict[str, str]:
        passthrough = {k: v for k, v in os.environ.items()
                       if k.startswith(APP_PASSTHROUGH_PREFIXES) and not k.startswith(SUITE_ONLY_PREFIX)}
        return {
            **passthrough, "DJANGO_SETTINGS_MODULE": "flashsale.settings.base",
            "MYSQL_PORT": str(self.mysql_port), "REDIS_PORT": str(self.redis_port),
            "REDIS_GATE_PORT": str(self.redis_gate_port), "ZK_PORT": str(self.zk_port),
            "ZOOKEEPER_HOSTS": self.zk_hosts, "FLASHSALE_INSTANCE": name,
            "FLASHSALE_SERVER": self.server,
            # Every worker's metrics, summed at a scrape (common.metrics); emptied at start.
            "PROMETHEUS_MULTIPROC_DIR": str(self.metrics_root / name),
            "FLASHSALE_STRATEGY": self.strategy,
            "FLASHSALE_SECTION_DELAY_MS": str(self.section_delay_ms),
            "FLASHSALE_SOLD_OUT_FAST_PATH": "true" if self.fast_path else "false",
            "FLASHSALE_GATE_PIPELINE": "true" if self.gate_pipeline else "false",
            "FLASHSALE_GATE_REPLICAS": str(self.gate_replicas),
            "FLASHSALE_METRICS": "true" if self.metrics else "false",
            "FLASHSALE_BUYER_AUTH": "true" if self.buyer_auth else "false",
            "FLASHSALE_ADMIN_TOKEN": self.admin_token(),
            "DJANGO_SECRET_KEY": self.secret_key(),
            "DJANGO_STATIC_ROOT": str(self.static_root),
            "FLASHSALE_PROMETHEUS_URL": f"http://127.0.0.1:{self.prometheus_port}",
            "FLASHSALE_PAYMENTS_API_BASE": f"http://127.0.0.1:{self.payprovider_port}",
            "FLASHSALE_PAYMENTS_API_KEY": self.payments_api_key(),
            "FLASHSALE_PAYMENTS_WEBHOOK_SECRET": self.payments_webhook_secret(),
            "FLASHSALE_PAYMENT_GRACE_S": str(self.payment_grace_s),
            # Every load test here comes from one address, and the comparison's
            # buyers would trip a per-user rate too: off unless asked for.
            "FLASHSALE_THROTTLE_USER": os.environ.get("FLASHSALE_THROTTLE_USER", ""),
            "FLASHSALE_THROTTLE_ADDRESS": os.environ.get("FLASHSALE_THROTTLE_ADDRESS", ""),
            # The tests' and tools' buyers sign up from this one address too.
            "FLASHSALE_THROTTLE_SIGN_UP": os.environ.get("FLASHSALE_THROTTLE_SIGN_UP", ""),
            # A load test's buyers may each pay many orders with a provider that
            # declines some: declines per buyer not counted unless asked for (per
            # order they are).
            "FLASHSALE_PAY_DECLINES_PER_BUYER": os.environ.get("FLASHSALE_PAY_DECLINES_PER_BUYER", ""),
            # Hundreds of them, in Python: new buyers cost no work unless asked for
            # (a waiting room's places do when its reset says so).
            "FLASHSALE_SIGN_UP_CHALLENGE_BITS": str(self.sign_up_challenge_bits),
            # And fail to sign in from it (the schema's fuzzer, thousands of times): the
            # lockout counts per username only (0: not per client) unless asked for.
            "FLASHSALE_SIGN_IN_FREE_PER_CLIENT": os.environ.get("FLASHSALE_SIGN_IN_FREE_PER_CLIENT", "0"),
            # And their crowds ask a waiting room for places from it: no bound (0).
            "FLASHSALE_ROOM_PLACES_PER_ADDRESS": os.environ.get("FLASHSALE_ROOM_PLACES_PER_ADDRESS", "0"),
        }

    def persister_environment(self, name: str) -> dict[str, str]:
        """An app's environment without what only the requests read (the strategy and
        the requests' knobs): a persister keeps draining while the apps restart with another."""
        selling = {*REQUEST_KNOBS, "FLASHSALE_STRATEGY", "FLASHSALE_METRICS",
                   # gunicorn's workers' files: a persister is one process, no gunicorn.
                   "PROMETHEUS_MULTIPROC_DIR"}
        return {k: v for k, v in self.app_environment(name).items() if k not in selling}

    def expirer_environment(self) -> dict[str, str]:
        """An app's environment, its strategy included: the expirer returns stock the
        way the sale's strategy takes it (``payments.expiry``), so it follows the
        deployment's like an instance, held at a switch by the same barrier. Not the
        knobs of the requests alone: a change of those restarts the apps, not it."""
        env = {k: v for k, v in self.app_environment("expirer").items()
               if k not in REQUEST_KNOBS and k != "PROMETHEUS_MULTIPROC_DIR"}
        return {**env, "FLASHSALE_PURCHASES_HELD_UNTIL_FILE": str(self.released_file),
                "FLASHSALE_EXPIRY_PAUSE_MS": str(self.expiry_pause_ms)}


def log_file(config: StackConfig, name: str) -> Path:
    return config.dir("logs") / f"{name}.log"
