"""The production overlay's start step for the gate's Redis Cluster
(``deploy/k8s/overlays/production/redis-gate-start.sh``), on real redis-servers: a
cluster whose every node comes back on a new address, as pods do after a full
restart. Loopback has every 127.x address, so the nodes move from 127.0.0.2-4 to
127.0.0.5-7; the pods' DNS is a ``getent`` on the PATH that answers their hostnames
with the new addresses (the step asks nothing else)."""

import os
import signal
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
import redis

from stack.scratch import free_cluster_port
from stack.servers import binary

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parent.parent
START = ROOT / "deploy/k8s/overlays/production/redis-gate-start.sh"
BEFORE, AFTER = ["127.0.0.2", "127.0.0.3", "127.0.0.4"], ["127.0.0.5", "127.0.0.6", "127.0.0.7"]


def node(directory: Path, address: str, port: int, name: str, *, started_by_the_step: bool,
         env: dict[str, str]) -> subprocess.Popen:
    server = [binary("redis-server"), "--bind", address, "--bind-source-addr", address, "--port", str(port),
              "--dir", str(directory),
              "--save", "", "--appendonly", "no", "--cluster-enabled", "yes",
              "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
              "--cluster-announce-hostname", name, "--logfile", str(directory / "redis.log")]
    command = ["sh", str(START), *server] if started_by_the_step else server
    return subprocess.Popen(command, env={**os.environ, "NODES_CONF": str(directory / "nodes.conf"),
                                          "RESOLVE_SECONDS": "5", **env},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def until(condition, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def cluster_ok(address: str, port: int) -> bool:
    with redis.Redis(host=address, port=port, socket_timeout=1, decode_responses=True) as client:
        return client.cluster("info")["cluster_state"] == "ok"


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)  # a clean stop writes nodes.conf
        process.wait(10)


@pytest.mark.parametrize("repaired", [False, True], ids=["as-is", "with-the-start-step"])
def test_after_every_node_moved_the_cluster_is_whole_again_only_with_the_start_step(tmp_path, repaired):
    ports = [free_cluster_port() for _ in BEFORE]
    names = [f"redis-gate-{i}.redis-gate-nodes" for i in range(len(ports))]
    directories = [tmp_path / f"node{i}" for i in range(len(ports))]
    dns = tmp_path / "bin"
    dns.mkdir()
    answers = "".join(f'[ "$2" = "{name}" ] && echo "{address}       {name}" && exit 0\n'
                      for name, address in zip(names, AFTER, strict=True))
    (dns / "getent").write_text(f"#!/bin/sh\n{answers}exit 2\n")
    (dns / "getent").chmod(0o755)
    with ExitStack() as running:
        first = []
        for directory, address, port, name in zip(directories, BEFORE, ports, names, strict=True):
            directory.mkdir()
            process = node(directory, address, port, name, started_by_the_step=False, env={})
            running.callback(stop, process)
            first.append(process)
        for address, port in zip(BEFORE, ports, strict=True):
            until(lambda a=address, p=port: redis.Redis(host=a, port=p, socket_timeout=1).ping(), "a node up")
        created = subprocess.run(
            [binary("redis-cli"), "--cluster", "create",
             *(f"{a}:{p}" for a, p in zip(BEFORE, ports, strict=True)),
             "--cluster-replicas", "0", "--cluster-yes"], capture_output=True, text=True, timeout=60)
        assert created.returncode == 0, created.stdout + created.stderr
        until(lambda: all(cluster_ok(a, p) for a, p in zip(BEFORE, ports, strict=True)), "the cluster formed")
        for process in first:
            stop(process)
        assert all(name in (d / "nodes.conf").read_text() for d, name in zip(directories, names, strict=True))

        # Every pod back, each on a new address.
        for directory, address, port, name in zip(directories, AFTER, ports, names, strict=True):
            process = node(directory, address, port, name, started_by_the_step=repaired,
                           env={"POD_IP": address, "PATH": f"{dns}:{os.environ['PATH']}"})
            running.callback(stop, process)
        if repaired:
            until(lambda: all(cluster_ok(a, p) for a, p in zip(AFTER, ports, strict=True)),
                  "the cluster whole again")
            conf = (directories[0] / "nodes.conf").read_text()
            assert not any(old in conf for old in BEFORE) and all(new in conf for new in AFTER)
        else:
            time.sleep(6)  # three node timeouts: no node reaches another at its old address
            assert not any(cluster_ok(a, p) for a, p in zip(AFTER, ports, strict=True))
