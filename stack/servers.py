"""The servers of the local stack: how each starts, where it logs, when it is ready.

All listen on 127.0.0.1 only and keep their data, logs and pid files under the
run directory (``.run/``, git-ignored).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import string
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .config import ROOT, StackConfig, log_file

SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/sbin"])
ZOOKEEPER_CLASSPATH = ":".join(
    f"/usr/share/java/{jar}" for jar in ("zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar")
)


# Bounds on any one query and on how many run at once: the alerts are evaluated by
# the same Prometheus the dashboard's data is asked of (docker-compose.yml: the same).
PROMETHEUS_QUERY_LIMITS = ("--query.timeout=10s", "--query.max-samples=5000000", "--query.max-concurrency=4")


class Placeholders(string.Template):
    # nginx configs are full of $variables; ours are @{name}.
    delimiter = "@"


class StackError(Exception):
    pass


def binary(name: str) -> str:
    path = shutil.which(name, path=SBIN_PATH)
    if path is None:
        raise StackError(f"{name} is not installed (run `make install`)")
    return path


def render(template: Path, target: Path, **values) -> Path:
    target.write_text(Placeholders(template.read_text()).substitute(**values))
    return target


@dataclass
class Server:
    name: str
    command: list[str]
    port: int | None  # None: it listens on none (a persister)
    probe: Callable[[], None]  # raises until the server answers
    priority: int  # supervisor starts low first and stops high first
    logs: list[Path] = field(default_factory=list)  # beside supervisor's capture of stdout
    environment: dict[str, str] = field(default_factory=dict)
    stop_wait: int = 10
    # A bound for a server that hangs, not for a busy machine: one that exits is
    # caught at once by its state, and a starved one is slow, not hung.
    ready_timeout: float = 120.0


# --- readiness probes --------------------------------------------------------------


def _mariadb_probe(sock: Path) -> Callable[[], None]:
    def probe() -> None:
        import MySQLdb

        MySQLdb.connect(unix_socket=str(sock), user="root", connect_timeout=1).close()

    return probe


def _redis_probe(port: int) -> Callable[[], None]:
    def probe() -> None:
        import redis

        redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1).ping()

    return probe


def redis_client_probe(port: int, name: str, host: str = "127.0.0.1") -> Callable[[], None]:
    """Ready once the process is connected to Redis under its own name (a persister's
    gate client names itself after FLASHSALE_INSTANCE; the race runner's queue, --name)."""

    def probe() -> None:
        import redis

        clients = redis.Redis(host=host, port=port, socket_timeout=1, socket_connect_timeout=1).client_list()
        if not any(client.get("name") == name for client in clients):
            raise ConnectionError(f"{name} has not connected to Redis yet")

    return probe


def zookeeper_probe(port: int, host: str = "127.0.0.1") -> Callable[[], None]:
    def probe() -> None:
        if zookeeper_mode(port, host) is None:
            raise ConnectionError("zookeeper is not serving yet")

    return probe


def zookeeper_mode(port: int, host: str = "127.0.0.1") -> str | None:
    """standalone, leader or follower, as "srvr" says once the node serves; None
    for an ensemble member without a quorum (it answers no mode)."""
    for line in zookeeper_four_letters(port, b"srvr", host).splitlines():
        if line.startswith("Mode: "):
            return line.removeprefix("Mode: ")
    return None


def zookeeper_four_letters(port: int, word: bytes, host: str = "127.0.0.1") -> str:
    with socket.create_connection((host, port), timeout=1) as s:
        s.sendall(word)
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def http_probe(url: str) -> Callable[[], None]:
    def probe() -> None:
        with urllib.request.urlopen(url, timeout=2) as response:  # non-2xx raises
            response.read()

    return probe


# --- the stack ---------------------------------------------------------------------


# Data and log written through the page cache and flushed by fsync, the doublewrite
# buffer kept: with O_DIRECT, MariaDB's default, a SIGKILLed server came back refusing
# to start ("Unable to apply log to corrupted page") or asserting in purge; a process's
# crash cannot take back what the page cache holds. ``loose-``: a server without the
# log setting ignores it. Measured by ``python -m benchmarks.mariadb_crash``.
INNODB_IO = ("--innodb-flush-method=fsync", "--loose-innodb-log-file-buffering=ON")


def mariadbd_as_root() -> list[str]:
    """What mariadbd needs to run as root, when this process is: it refuses otherwise."""
    return ["--user=root"] if os.geteuid() == 0 else []


def mariadb(config: StackConfig) -> Server:
    d = config.dir("mariadb")
    return Server(
        name="mariadb",
        command=[
            binary("mariadbd"), "--no-defaults", f"--datadir={d / 'data'}",
            f"--socket={d / 'mysqld.sock'}", f"--port={config.mysql_port}",
            "--bind-address=127.0.0.1", f"--pid-file={d / 'mysqld.pid'}",
            f"--log-error={d / 'error.log'}", "--skip-log-bin", "--skip-name-resolve",
            "--max-connections=1000", "--innodb-buffer-pool-size=256M",
            # On by default from MariaDB 11.6: it refuses an unprotected read-modify-write
            # ("Record has changed") where MySQL loses the update, and the weak strategies
            # are here to show that loss. ``loose-``: a server without it ignores it.
            "--loose-innodb-snapshot-isolation=OFF", f"--tmpdir={mariadb_tmpdir(d / 'data')}",
            *INNODB_IO, *mariadbd_as_root(),
        ],
        port=config.mysql_port,
        probe=_mariadb_probe(d / "mysqld.sock"),
        priority=10,
        logs=[d / "error.log"],
        stop_wait=60,
    )


def _redis_server(config: StackConfig, name: str, *, port: int, role: str, maxmemory: str,
                  policy: str, appendfsync: str) -> Server:
    d = config.dir(name)
    conf = render(ROOT / "stack/templates/redis.conf", d / "redis.conf", role=role, port=port, data_dir=d,
                  appendfsync=appendfsync, maxmemory=maxmemory, policy=policy)
    return Server(name=name, command=[binary("redis-server"), str(conf)], port=port,
                  probe=_redis_probe(port), priority=10)


def redis(config: StackConfig) -> Server:
    """The Redis of the locks, the idempotency flags, the sale's states, the throttles
    and Django's cache. Past its maxmemory it evicts the least recently used key that
    has a TTL (volatile-lru): cache entries, throttle windows, finished purchases'
    flags (the order's unique key stays the final guard), lock leases (a lease evicted
    is a lease expired: the fencing token refuses the stale holder's write). Keys
    without a TTL stay: a pending purchase's claim, the sale's states, fence counters."""
    return _redis_server(config, "redis", port=config.redis_port,
                         role="locks, flags, marks, throttles, cache: evicts TTL'd keys past maxmemory",
                         maxmemory=config.redis_maxmemory, policy="volatile-lru",
                         appendfsync=config.redis_appendfsync)


def redis_gate(config: StackConfig) -> Server:
    """The gate's Redis: each gate sale's stock and the stream of orders accepted and
    not yet written. Apart from the cache, so that no FLUSHDB of the cache and no
    eviction reaches an order already answered 201: noeviction (past its maxmemory a
    purchase is refused 503, never an accepted order dropped). Its append-only file
    is fsynced before each reply (``REDIS_GATE_APPENDFSYNC``, ``always``): under
    ``everysec`` Redis answers writes it has not yet written while the last second's
    fsync runs, and a crash then takes back 201s (``benchmarks.aof_crash``)."""
    return _redis_server(config, "redis-gate", port=config.redis_gate_port,
                         role="the gate's sales and order streams: never evicts",
                         maxmemory=config.redis_gate_maxmemory, policy="noeviction",
                         appendfsync=config.redis_gate_appendfsync)


REDIS_SERVERS = ("redis", "redis-gate")


def redis_data(config: StackConfig) -> list[Path]:
    """Where the stack's Redis servers keep their data (their append-only files)."""
    return [config.run_dir / name / "appendonlydir" for name in REDIS_SERVERS]


def zookeepers(config: StackConfig) -> list[Server]:
    """One standalone server, or an ensemble of ``zk_nodes`` on consecutive ports
    (peer and election ports 100 and 200 above)."""
    ensemble = config.zk_nodes > 1
    names = [f"zk{i}" for i in range(1, config.zk_nodes + 1)] if ensemble else ["zookeeper"]
    members = "\n".join(
        f"server.{i}=127.0.0.1:{config.zk_port + 100 + i}:{config.zk_port + 200 + i}"
        for i in range(1, config.zk_nodes + 1)
    ) if ensemble else ""
    servers = []
    for i, name in enumerate(names):
        d = config.dir("zookeeper", name) if ensemble else config.dir("zookeeper")
        data = config.dir(*d.relative_to(config.run_dir).parts, "data")
        if ensemble:
            (data / "myid").write_text(f"{i + 1}\n")
        conf = render(ROOT / "stack/templates/zoo.cfg", d / "zoo.cfg",
                      port=config.zk_port + i, data_dir=data, members=members, address="127.0.0.1")
        log4j = render(ROOT / "stack/templates/log4j.properties", d / "log4j.properties")
        servers.append(Server(
            name=name,
            command=zookeeper_command(conf, log4j),
            port=config.zk_port + i,
            probe=zookeeper_probe(config.zk_port + i),
            priority=10,
        ))
    return servers


def zookeeper_command(conf: Path, log4j: Path) -> list[str]:
    # No hsperfdata (jstat's counters): its sampler woke the JVM 20 times a second.
    return [binary("java"), "-Xmx256m", "-XX:-UsePerfData", "-cp", ZOOKEEPER_CLASSPATH,
            f"-Dlog4j.configuration=file:{log4j}", "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(conf)]


def app(config: StackConfig, name: str) -> Server:
    port = config.app_port_of(name)
    return Server(
        name=name,
        command=[sys.executable, "-m", "flashsale.serve", f"--bind=127.0.0.1:{port}", f"--name={name}",
                 f"--workers={config.workers}", f"--threads={config.threads}"],
        port=port,
        probe=http_probe(f"http://127.0.0.1:{port}/readyz"),
        priority=20,
        # Held while another strategy's instances sell (stack.control._apps_in_line).
        environment={**config.app_environment(name),
                     "FLASHSALE_PURCHASES_HELD_UNTIL_FILE": str(config.released_file)},
    )


def persister(config: StackConfig, name: str) -> Server:
    """A persister of the gate's streams (``manage.py persist_orders``): the gate
    strategy's orders reach MySQL through these; idle under the other strategies."""
    return Server(
        name=name,
        command=[sys.executable, "manage.py", "persist_orders", f"--name={name}",
                 f"--metrics-port={config.persister_metrics_port(name)}"],
        port=None,
        probe=redis_client_probe(config.redis_gate_port, name),
        priority=20,
        environment=config.persister_environment(name),
    )


def expirer(config: StackConfig) -> Server:
    """The expirer (``manage.py expire_orders``): unpaid orders past their payment
    window go back on sale through it; idle while no sale has a window."""
    port = config.expirer_metrics_port
    return Server(
        name="expirer",
        command=[sys.executable, "manage.py", "expire_orders", f"--metrics-port={port}"],
        port=None,
        probe=http_probe(f"http://127.0.0.1:{port}/metrics"),
        priority=20,
        environment=config.expirer_environment(),
    )


def payprovider_command(config: StackConfig, *, port: int, webhooks_to: str,
                        host: str | None = None) -> list[str]:
    """The stand-in's command line, with the stack's keys and misbehaviour: listening
    at ``host`` (default: its own, 127.0.0.1) and ``port``, its webhooks to the
    instances at ``webhooks_to`` (a base URL)."""
    return [sys.executable, "-m", "payprovider", *([f"--host={host}"] if host else []), f"--port={port}",
            f"--api-key={config.payments_api_key()}",
            f"--webhook-secret={config.payments_webhook_secret()}",
            f"--webhook-url={webhooks_to}/api/payments/webhook",
            f"--duplicate={config.payprovider_duplicate}", f"--delay-ms={config.payprovider_delay_ms}",
            f"--decline={config.payprovider_decline}", f"--workers={config.payprovider_workers}"]


def payprovider(config: StackConfig) -> Server:
    """The payment provider's stand-in (``python -m payprovider``): Stripe's test mode
    as far as flashsale pays, its webhooks to the stack's nginx."""
    port = config.payprovider_port
    return Server(
        name="payprovider",
        command=payprovider_command(config, port=port, webhooks_to=config.base_url),
        port=port,
        probe=http_probe(f"http://127.0.0.1:{port}/healthz"),
        priority=20,
        environment={},
    )


def race_histories(config: StackConfig) -> Path:
    """Where the stack's race runner records each race's history."""
    return config.run_dir / "races"


def racer(config: StackConfig) -> Server:
    """The race runner (``manage.py run_races``): it takes the races the API queues and
    sends their buyers through the stack's own nginx, outside the web workers."""
    return Server(
        name="racer",
        command=[sys.executable, "manage.py", "run_races", "--name=racer",
                 f"--metrics-port={config.racer_metrics_port}"],
        port=None,
        probe=redis_client_probe(config.redis_port, "racer"),
        priority=20,
        environment={**config.persister_environment("racer"), "FLASHSALE_RACE_TARGET": config.base_url,
                     "FLASHSALE_RACE_HISTORIES": str(race_histories(config))},
    )


# The template's line that names the instance that answered, where it is asked for.
UPSTREAM_HEADER = "            add_header X-Upstream $upstream_addr always;"


# nginx's stub_status, for the nginx exporter, on a loopback port of its own.
STATUS_SERVER = """    server {{
        listen {listen};
        location = /stub_status {{ stub_status; }}
        location / {{ return 404; }}
    }}"""


def real_ip_lines(proxies: list[str]) -> str:
    """The template's real-IP directives for these trusted proxies; none for none."""
    if not proxies:
        return ""
    trusted = "".join(f"    set_real_ip_from {proxy};\n" for proxy in proxies)
    return f"{trusted}    real_ip_header X-Forwarded-For;\n    real_ip_recursive on;"


def nginx(config: StackConfig, admitted: list[str] | None = None) -> Server:
    """nginx, its config written with the instances it sends requests to: ``admitted``,
    or every instance of ``config``."""
    d = config.dir("nginx")
    upstream = "\n".join(
        f"        server 127.0.0.1:{config.app_port_of(name)};" for name in admitted or config.app_names
    )
    conf = render(ROOT / "nginx/nginx.conf.template", d / "nginx.conf",
                  run=d, error_log=d / "error.log", listen=f"127.0.0.1:{config.nginx_port}",
                  upstream_servers=upstream,
                  static_root=config.static_root, docs_root=config.docs_root,
                  cache_root=config.nginx_cache_root,
                  server_names=config.nginx_server_names,
                  known_hosts="\n".join(f'        "{h}" "";' for h in config.nginx_server_names.split()),
                  purchase_rate=config.nginx_purchase_rate,
                  read_rate=config.nginx_read_rate,
                  upstream_header=UPSTREAM_HEADER if config.nginx_show_upstream else "",
                  real_ip=real_ip_lines(config.nginx_trusted_proxies.split()),
                  admin_allow="\n".join(f"            allow {a};" for a in config.nginx_admin_allow.split()),
                  race_listen="", race_rate_client="",  # the stack's rates are far above a race's
                  edge_log="",  # the edge's mtail reads nginx's log as supervisord keeps it
                  status_server=STATUS_SERVER.format(listen=f"127.0.0.1:{config.nginx_status_port}"))
    return Server(
        name="nginx",
        command=[binary("nginx"), "-c", str(conf), "-p", str(d), "-e", str(d / "error.log")],
        port=config.nginx_port,
        probe=http_probe(f"{config.base_url}/readyz"),
        priority=30,
        logs=[d / "error.log"],
    )


# --- what watches it: Prometheus and the exporters -------------------------------


def prometheus(config: StackConfig) -> Server:
    """Prometheus, scraping every process of the stack (``stack/templates/prometheus.yml``)
    with flashsale's rules and alerts (``monitoring/rules.yml``); two days kept."""
    d = config.dir("prometheus")
    targets = config.dir("prometheus", "targets")
    _json_write(targets / "app.json", [{"targets": [f"127.0.0.1:{config.app_port_of(name)}"
                                                    for name in config.app_names]}])
    _json_write(targets / "persister.json", [{"targets": [f"127.0.0.1:{config.persister_metrics_port(name)}"
                                                          for name in config.persister_names]}])
    ports = config.exporter_ports
    conf = render(ROOT / "stack/templates/prometheus.yml", d / "prometheus.yml",
                  rules=ROOT / "monitoring/rules.yml", targets=targets, racer_port=config.racer_metrics_port,
                  expirer_port=config.expirer_metrics_port,
                  redis_port=config.redis_port, redis_gate_port=config.redis_gate_port,
                  redis_exporter_port=ports["redis"], mysqld_exporter_port=ports["mysqld"],
                  nginx_exporter_port=ports["nginx"], edge_exporter_port=ports["edge"],
                  prometheus_port=config.prometheus_port,
                  alertmanager_port=config.alertmanager_port)
    port = config.prometheus_port
    return Server(
        name="prometheus",
        command=[binary("prometheus"), f"--config.file={conf}", f"--storage.tsdb.path={d / 'data'}",
                 "--storage.tsdb.retention.time=2d", f"--web.listen-address=127.0.0.1:{port}",
                 "--log.level=warn", *PROMETHEUS_QUERY_LIMITS],
        port=port,
        probe=http_probe(f"http://127.0.0.1:{port}/-/ready"),
        priority=40,
    )


def alertmanager(config: StackConfig) -> Server:
    """Alertmanager, which Prometheus sends the alerts of ``monitoring/rules.yml`` to,
    routing them to the pager (``stack/templates/alertmanager.yml``); alone, not a
    cluster."""
    d = config.dir("alertmanager")
    conf = render(ROOT / "stack/templates/alertmanager.yml", d / "alertmanager.yml",
                  pager_port=config.pager_port)
    port = config.alertmanager_port
    return Server(
        name="alertmanager",
        command=[binary("prometheus-alertmanager"), f"--config.file={conf}", f"--storage.path={d / 'data'}",
                 f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=warn"],
        port=port,
        probe=http_probe(f"http://127.0.0.1:{port}/-/ready"),
        priority=40,
    )


def pager(config: StackConfig) -> Server:
    """The pager's stand-in (``python -m pager``): Alertmanager's receiver, each alert a
    JSON line in ``.run/pager/alerts.jsonl``, the latest at ``GET /alerts``."""
    port, log = config.pager_port, config.dir("pager") / "alerts.jsonl"
    return Server(
        name="pager",
        command=[sys.executable, "-m", "pager", f"--port={port}", f"--log={log}"],
        port=port,
        probe=http_probe(f"http://127.0.0.1:{port}/-/ready"),
        priority=35,
        logs=[log],
    )


def _json_write(path: Path, value) -> None:
    """Write ``value`` whole or not at all: Prometheus watches the file."""
    staged = path.with_suffix(".tmp")
    staged.write_text(json.dumps(value))
    staged.replace(path)


# The MariaDB user the exporter reads the server's status as (local stack only).
EXPORTER_DB_USER = EXPORTER_DB_PASSWORD = "exporter"


def exporters(config: StackConfig) -> list[Server]:
    """Prometheus' exporters of the stack's Redis servers (the gate's streams too),
    MariaDB (its row-lock waits: the hot row's signal), nginx (stub_status) and the
    edge (the purchases' answers in nginx's access log).

    Each is probed on a page it serves without scraping: a scrape answers 200 whether
    or not it reached its server (that is its ``*_up`` metric, Prometheus' to read),
    and the mysqld exporter's runs queries that a busy MariaDB can keep past the
    probe's bound."""
    ports = config.exporter_ports
    d = config.dir("exporters")
    my_cnf = d / "mysqld-exporter.cnf"
    my_cnf.write_text(f"[client]\nuser={EXPORTER_DB_USER}\npassword={EXPORTER_DB_PASSWORD}\n"
                      f"host=127.0.0.1\nport={config.mysql_port}\n")
    my_cnf.chmod(0o600)
    return [
        Server(
            name="redis-exporter",
            command=[binary("prometheus-redis-exporter"), f"-web.listen-address=127.0.0.1:{ports['redis']}",
                     "-redis.addr="],  # no Redis of its own: Prometheus names each in its scrape
            port=ports["redis"],
            probe=http_probe(f"http://127.0.0.1:{ports['redis']}/health"),
            priority=40,
        ),
        Server(
            name="mysqld-exporter",
            command=[binary("prometheus-mysqld-exporter"), f"--config.my-cnf={my_cnf}",
                     f"--web.listen-address=127.0.0.1:{ports['mysqld']}", "--log.level=warn",
                     "--no-collect.slave_status"],  # no replica here, and it needs SLAVE MONITOR
            port=ports["mysqld"],
            probe=http_probe(f"http://127.0.0.1:{ports['mysqld']}/"),
            priority=40,
        ),
        Server(
            name="nginx-exporter",
            command=[binary("prometheus-nginx-exporter"),
                     f"-nginx.scrape-uri=http://127.0.0.1:{config.nginx_status_port}/stub_status",
                     f"-web.listen-address=127.0.0.1:{ports['nginx']}"],
            port=ports["nginx"],
            probe=http_probe(f"http://127.0.0.1:{ports['nginx']}/"),
            priority=40,
        ),
        # The purchases' answers as nginx gave them (stub_status counts no status codes):
        # mtail reads nginx's access log, as supervisord keeps (and rotates: mtail
        # follows) it, from its end.
        Server(
            name="edge-exporter",
            command=[binary("mtail"), f"--progs={ROOT / 'monitoring/nginx.mtail'}",
                     f"--logs={log_file(config, 'nginx')}", "--address=127.0.0.1",
                     f"--port={ports['edge']}", "--emit_prog_label=false", "--logtostderr"],
            port=ports["edge"],
            probe=http_probe(f"http://127.0.0.1:{ports['edge']}/"),
            priority=40,
        ),
    ]


def watchers(config: StackConfig) -> list[Server]:
    return [*exporters(config), pager(config), alertmanager(config), prometheus(config)]


def infrastructure(config: StackConfig) -> list[Server]:
    return [mariadb(config), redis(config), redis_gate(config), *zookeepers(config)]


def apps(config: StackConfig) -> list[Server]:
    return [app(config, name) for name in config.app_names]


def workers(config: StackConfig) -> list[Server]:
    """The processes beside the apps: the gate's persisters, the expirer, the race
    runner and the payment provider's stand-in."""
    return [*(persister(config, name) for name in config.persister_names), expirer(config), racer(config),
            payprovider(config)]


def all_servers(config: StackConfig) -> list[Server]:
    return [*infrastructure(config), *apps(config), *workers(config), nginx(config), *watchers(config)]


# --- one-time preparation ------------------------------------------------------------


def mariadb_install(config: StackConfig) -> None:
    """Create the data directory once (``mariadb-install-db``)."""
    d = config.dir("mariadb")
    if not (d / "data" / "mysql").is_dir():
        mariadb_datadir(d / "data", log=d / "install.log")


def mariadb_tmpdir(data: Path) -> Path:
    """The temporary directory of the server on ``data``: its own, beside the data.
    A MariaDB that starts (the installer's too) deletes every ``#sql*`` file in its
    tmpdir, where running servers keep their internal temporary tables: in a shared
    /tmp, another server's start took them from under its queries ("Error on delete
    of '/tmp/#sql-temptable-…'", or a crash in ``ha_maria::drop_table``)."""
    tmp = data.parent / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return tmp


def mariadb_datadir(data: Path, *, log: Path) -> None:
    """A new MariaDB data directory at ``data`` (``mariadb-install-db``), root reached
    by its socket; what the installer says goes to ``log``."""
    user = "root" if os.geteuid() == 0 else os.environ.get("USER", "mysql")
    with log.open("w") as out:
        result = subprocess.run(
            [binary("mariadb-install-db"), "--no-defaults", f"--datadir={data}",
             f"--user={user}", "--auth-root-authentication-method=normal", "--skip-test-db",
             f"--tmpdir={mariadb_tmpdir(data)}"],
            stdout=out, stderr=subprocess.STDOUT,
        )
    if result.returncode:
        raise StackError(f"mariadb-install-db failed; see {log}\n{tail(log)}")


# The app's database and user on the local stack (the settings' default DATABASE_URL).
APP_DATABASE = APP_DB_USER = APP_DB_PASSWORD = "flashsale"


def app_database_url(config: StackConfig, database: str = APP_DATABASE, host: str = "127.0.0.1") -> str:
    """``database`` on the stack's MariaDB, as the app's user reaches it at ``host``."""
    return f"mysql://{APP_DB_USER}:{APP_DB_PASSWORD}@{host}:{config.mysql_port}/{database}"


def mariadb_bootstrap(config: StackConfig) -> None:
    """The app's database and user, with rights on pytest-django's test_ database too."""
    import MySQLdb

    conn = MySQLdb.connect(unix_socket=str(config.run_dir / "mariadb" / "mysqld.sock"), user="root")
    try:
        cursor = conn.cursor()
        cursor.execute(f"CREATE DATABASE IF NOT EXISTS {APP_DATABASE} CHARACTER SET utf8mb4")
        for host in ("127.0.0.1", "localhost"):
            user = f"'{APP_DB_USER}'@'{host}'"
            cursor.execute(f"CREATE USER IF NOT EXISTS {user} IDENTIFIED BY '{APP_DB_PASSWORD}'")
            cursor.execute(f"GRANT ALL ON {APP_DATABASE}.* TO {user}")
            cursor.execute(f"GRANT ALL ON `test\\_{APP_DATABASE}%`.* TO {user}")
        # The exporter reads the server's status, nothing of the data.
        exporter = f"'{EXPORTER_DB_USER}'@'127.0.0.1'"
        cursor.execute(f"CREATE USER IF NOT EXISTS {exporter} IDENTIFIED BY '{EXPORTER_DB_PASSWORD}' "
                       "WITH MAX_USER_CONNECTIONS 3")
        cursor.execute(f"GRANT PROCESS ON *.* TO {exporter}")
    finally:
        conn.close()


def mariadb_app_connection(config: StackConfig, *, database: str | None = APP_DATABASE):
    """A connection to the app's database (or ``database``; None: none chosen) as the
    app's user, in autocommit: what an auditor outside the apps reads the sale from."""
    import MySQLdb

    chosen = {} if database is None else {"database": database}
    return MySQLdb.connect(host="127.0.0.1", port=config.mysql_port, user=APP_DB_USER,
                           password=APP_DB_PASSWORD, autocommit=True, **chosen)


def mariadb_app_client(config: StackConfig, program: str) -> tuple[list[str], dict[str, str]]:
    """A MariaDB client (``mariadb``, ``mariadb-dump``) to the stack's server as the
    app's user: its command, and the environment that gives it the password, which a
    command line would show to every ``ps``."""
    command = [binary(program), "--host=127.0.0.1", f"--port={config.mysql_port}", f"--user={APP_DB_USER}"]
    return command, {**os.environ, "MYSQL_PWD": APP_DB_PASSWORD}


def tail(path: Path, lines: int = 20) -> str:
    if not path.exists():
        return f"  ({path} does not exist)"
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return "\n".join(f"  | {line}" for line in text) or f"  ({path} is empty)"


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
