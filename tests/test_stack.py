"""The launcher itself, on a second stack of its own (tests/second_stack.py)."""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest

from flashsale.serve import SERVERS
from stack.config import log_file
from stack.servers import all_servers, port_in_use
from stack.supervisor import Supervisor, descendants, pid_alive

from .second_stack import PORTS, config_for, stack

pytestmark = pytest.mark.server  # it starts servers of its own


WATCHERS = ("prometheus", "redis-exporter", "mysqld-exporter", "nginx-exporter", "edge-exporter",
            "alertmanager", "pager")


# Each server once; the second's stack without its watchers, as make test's stacks start.
@pytest.mark.parametrize(("server", "watched"), [pytest.param(server, n == 0, id=server)
                                                for n, server in enumerate(SERVERS)])
def test_up_status_down_leaves_no_process_and_no_port(second_run_dir, server, watched):
    up = stack(second_run_dir, "up", *([] if watched else ["--unwatched"]), FLASHSALE_SERVER=server)
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"nginx ready on 127.0.0.1:{PORTS['NGINX_PORT']}" in up.stdout and f"server={server}" in up.stdout

    status = stack(second_run_dir, "status")
    assert status.returncode == 0, status.stdout
    config = config_for(second_run_dir)
    for name in ("mariadb", "redis", "redis-gate", "zookeeper", "app1", "nginx", "racer", "expirer",
                 "payprovider", *config.persister_names, *WATCHERS):
        assert f"\n{name}" in status.stdout

    sup = Supervisor(config)
    running = {p["name"]: p["pid"] for p in sup.processes() if p["statename"] == "RUNNING"}
    assert set(WATCHERS) & running.keys() == (set(WATCHERS) if watched else set())
    pids = [*running.values(), sup.daemon_pid()]
    # The servers (MariaDB, two Redis, ZooKeeper, nginx), one app, the persisters (two
    # by default), the expirer, the race runner, the payment provider's stand-in,
    # supervisord, and when watched Prometheus and four exporters, Alertmanager and the pager.
    assert len(pids) == 10 + config.persisters + len(WATCHERS) * watched
    assert all(pid_alive(pid) for pid in pids)
    app = psutil.Process(sup.info("app1")["pid"])
    assert server in " ".join(app.cmdline())
    workers = [child.pid for child in app.children(recursive=True)]  # the server's workers
    assert len(workers) >= config.workers

    down = stack(second_run_dir, "down")
    assert down.returncode == 0, down.stderr
    assert not [pid for pid in pids + workers if pid_alive(pid)]
    # By tiers, the highest priority first: what writes stopped while its servers ran.
    priority = {server.name: server.priority for server in all_servers(config)}
    stopped = [line.split("stopped: ")[1].split()[0]
               for line in log_file(config, "supervisord").read_text().splitlines() if " stopped: " in line]
    assert sorted(stopped) == sorted(running)
    assert [priority[name] for name in stopped] == sorted((priority[name] for name in stopped), reverse=True)
    metrics_ports = [*config.exporter_ports.values(), config.nginx_status_port, config.racer_metrics_port,
                     config.alertmanager_port, config.pager_port,
                     *(config.persister_metrics_port(name) for name in config.persister_names)]
    assert not [port for port in [*PORTS.values(), config.redis_gate_port, *metrics_ports]
                if port_in_use(int(port))]
    assert stack(second_run_dir, "status").returncode == 3  # "not running"


def test_a_server_that_fails_to_start_is_named_with_its_log_tail(second_run_dir):
    # A data directory that looks installed but holds no system tables.
    (second_run_dir / "mariadb" / "data" / "mysql").mkdir(parents=True)
    up = stack(second_run_dir, "up")
    assert up.returncode == 1
    assert "mariadb failed to start: process is EXITED" in up.stderr
    assert "Fatal error: Can't open and lock privilege tables" in up.stderr


def test_a_taken_port_is_reported_before_starting(second_run_dir):
    import socket

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", int(PORTS["REDIS_PORT"])))
        squatter.listen()
        up = stack(second_run_dir, "up")
    assert up.returncode == 1
    assert f"redis can't start: port {PORTS['REDIS_PORT']} is taken by another process" in up.stderr


def _crash_mariadb_once_migrate_is_connected(run_dir, mysql_port: int, crashed: list[str]) -> None:
    """SIGSEGV to the second stack's MariaDB once its ``migrate`` holds a connection:
    the signal a crash of the server raises, its own crash report written."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for child in descendants(os.getpid()):
            try:
                if "migrate" in child.cmdline() and any(
                        c.raddr and c.raddr.port == mysql_port for c in child.net_connections("tcp")):
                    os.kill(int((run_dir / "mariadb" / "mysqld.pid").read_text()), signal.SIGSEGV)
                    crashed.append(" ".join(child.cmdline()))
                    return
            except psutil.Error:
                continue
        time.sleep(0.01)


def test_a_mariadb_that_crashes_during_migrate_is_named_with_its_crash_report(second_run_dir):
    crashed: list[str] = []
    watcher = threading.Thread(target=_crash_mariadb_once_migrate_is_connected,
                               args=(second_run_dir, int(PORTS["MYSQL_PORT"]), crashed))
    watcher.start()
    up = stack(second_run_dir, "up")
    watcher.join()
    assert crashed, up.stdout + up.stderr
    assert up.returncode == 1
    assert "MariaDB exited during migrate; its log ends:" in up.stderr
    assert "got signal 11" in up.stderr  # the server's own report, from its log
