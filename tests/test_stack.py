"""The launcher itself, on a second stack of its own (other ports, its own run
directory), so the stack the rest of the suite uses is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stack.config import ROOT, StackConfig
from stack.servers import port_in_use
from stack.supervisor import Supervisor, pid_alive

PORTS = {"MYSQL_PORT": "3410", "REDIS_PORT": "6490", "ZK_PORT": "2290",
         "NGINX_PORT": "8180", "APP_PORT": "8101"}


def stack(run_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stack", *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, **PORTS, "RUN_DIR": str(run_dir), "INSTANCES": "1", **env},
    )


def config_for(run_dir: Path) -> StackConfig:
    saved = dict(os.environ)
    os.environ.update({**PORTS, "RUN_DIR": str(run_dir), "INSTANCES": "1"})
    try:
        return StackConfig.from_env()
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def run_dir(tmp_path):
    yield tmp_path
    stack(tmp_path, "down")  # whatever a failed assertion left behind


def test_up_status_down_leaves_no_process_and_no_port(run_dir):
    up = stack(run_dir, "up")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "nginx ready on 127.0.0.1:8180" in up.stdout

    status = stack(run_dir, "status")
    assert status.returncode == 0, status.stdout
    for name in ("mariadb", "redis", "zookeeper", "app1", "nginx"):
        assert f"\n{name}" in status.stdout

    sup = Supervisor(config_for(run_dir))
    pids = [p["pid"] for p in sup.processes()] + [sup.daemon_pid()]
    assert len(pids) == 6 and all(pid_alive(pid) for pid in pids)

    down = stack(run_dir, "down")
    assert down.returncode == 0, down.stderr
    assert not [pid for pid in pids if pid_alive(pid)]
    assert not [port for port in PORTS.values() if port_in_use(int(port))]
    assert stack(run_dir, "status").returncode == 3  # "not running"


def test_a_server_that_fails_to_start_is_named_with_its_log_tail(run_dir):
    # A data directory that looks installed but holds no system tables.
    (run_dir / "mariadb" / "data" / "mysql").mkdir(parents=True)
    up = stack(run_dir, "up")
    assert up.returncode == 1
    assert "mariadb failed to start: process is EXITED" in up.stderr
    assert "Fatal error: Can't open and lock privilege tables" in up.stderr


def test_a_taken_port_is_reported_before_starting(run_dir):
    import socket

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", int(PORTS["REDIS_PORT"])))
        squatter.listen()
        up = stack(run_dir, "up")
    assert up.returncode == 1
    assert "redis can't start: port 6490 is taken by another process" in up.stderr
