"""MariaDB's sizing in the manifests (deploy/k8s), as arithmetic that must add up on
each overlay: enough connections for every process the cluster can run at its
largest, and a memory limit that holds the buffer pool and every one of those
connections' buffers; and a disruption budget that lets a drain through. Each check
is shown to catch its fault planted in the rendered production overlay."""

from __future__ import annotations

import copy
import re

import pytest

from .test_k8s import K8S, OVERLAYS, container_of, of_kind, render, size_bytes

MIB = 1 << 20
# What one connection may hold at once, MariaDB 10.11's defaults: its thread's stack
# (292K), a sort buffer (2M), a join buffer (256K), the read and random-read buffers
# (128K, 256K), the network buffer (16K, grown to a packet). 3 MiB, rounded up.
PER_CONNECTION = 3 * MIB
# Beside the pool and the connections: InnoDB's own structures (a tenth of the pool),
# Aria's page cache and the key buffer (128M each), the log buffer (16M), the
# performance schema and the server's own (about 100M).
POOL_OVERHEAD = 0.1
FIXED = 384 * MIB
# Connections beyond the processes': an operator's client, a dump, the exporter.
SPARE = 10
def _flag(name: str, line: str) -> int:
    found = re.search(rf"--{name}=(\d+)", line)
    assert found is not None, (name, line)
    return int(found.group(1))


def _mariadb(docs: list[dict]) -> dict:
    return container_of(docs, "StatefulSet", "mariadb", "mariadb")


def _setting(container: dict, name: str) -> str:
    (value,) = [arg.split("=", 1)[1] for arg in container["args"] if arg.startswith(f"--{name}=")]
    return value


def _per_pod(command: list[str]) -> int:
    """The connections one pod's flashsale process may hold: each request thread of
    each worker keeps its own (CONN_MAX_AGE), and each worker's scrape reads the
    database on one more; a management command's loop and its metrics, two."""
    line = " ".join(command)
    if "flashsale.serve" in line:
        return _flag("workers", line) * (_flag("threads", line) + 1)
    return 2 if "manage.py" in line else 0


def connections_needed(docs: list[dict]) -> tuple[int, list[str]]:
    """The most connections the cluster's processes open at once, and how that adds up."""
    most = {a["spec"]["scaleTargetRef"]["name"]: a["spec"]["maxReplicas"]
            for a in of_kind(docs, "HorizontalPodAutoscaler").values()}
    total, lines = SPARE, [f"{SPARE} spare"]
    for doc in docs:
        if doc["kind"] not in ("Deployment", "StatefulSet", "Job", "CronJob"):
            continue
        spec = doc["spec"]["jobTemplate"]["spec"] if doc["kind"] == "CronJob" else doc["spec"]
        pods = most.get(doc["metadata"]["name"], spec.get("replicas", 1))
        each = sum(_per_pod(c.get("command", []) + c.get("args", []))
                   for c in spec["template"]["spec"]["containers"])
        if each:
            total += pods * each
            lines.append(f"{doc['metadata']['name']}: {pods} x {each}")
    return total, lines


def connections_short(docs: list[dict]) -> list[str]:
    needed, lines = connections_needed(docs)
    allowed = int(_setting(_mariadb(docs), "max-connections"))
    return [] if needed <= allowed else [f"max_connections {allowed} < {needed} ({', '.join(lines)})"]


def memory_needed(container: dict) -> int:
    pool = size_bytes(_setting(container, "innodb-buffer-pool-size"), "mariadb")
    connections = int(_setting(container, "max-connections"))
    return int(pool * (1 + POOL_OVERHEAD)) + connections * PER_CONNECTION + FIXED


def memory_short(docs: list[dict]) -> list[str]:
    container = _mariadb(docs)
    needed = memory_needed(container)
    limit = size_bytes(container["resources"]["limits"]["memory"], "kubernetes")
    return [] if needed <= limit else [
        f"needs {needed // MIB} MiB (the pool and {POOL_OVERHEAD:.0%} more, "
        f"{_setting(container, 'max-connections')} x {PER_CONNECTION // MIB} MiB, "
        f"{FIXED // MIB} MiB) in a {limit // MIB} MiB limit"]


def budget_blocking_a_drain(docs: list[dict]) -> list[str]:
    (budget,) = [b for b in of_kind(docs, "PodDisruptionBudget").values()
                 if b["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/component") == "mariadb"]
    allowed = budget["spec"].get("maxUnavailable", 1 - budget["spec"].get("minAvailable", 0))
    return [] if allowed >= 1 else [f"the database's budget lets no pod go ({budget['spec']})"]


CHECKS = {"connections": connections_short, "memory": memory_short, "budget": budget_blocking_a_drain}


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request) -> list[dict]:
    return render(K8S / "overlays" / request.param)


@pytest.mark.parametrize("check", CHECKS)
def test_the_database_is_sized_for_the_cluster_at_its_largest(rendered, check):
    assert CHECKS[check](rendered) == []


def _plant_connections(docs):
    of_kind(docs, "HorizontalPodAutoscaler")["flashsale-app"]["spec"]["maxReplicas"] *= 4


def _plant_memory(docs):
    args = _mariadb(docs)["args"]
    args[:] = ["--max-connections=2000" if arg.startswith("--max-connections=") else arg for arg in args]


def _plant_budget(docs):
    for budget in of_kind(docs, "PodDisruptionBudget").values():
        if budget["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/component") == "mariadb":
            budget["spec"] = {"maxUnavailable": 0, "selector": budget["spec"]["selector"]}


PLANTED = {"connections": _plant_connections, "memory": _plant_memory, "budget": _plant_budget}


@pytest.mark.parametrize("check", CHECKS)
def test_a_planted_fault_of_each_kind_is_caught(production, check):
    docs = copy.deepcopy(production)
    PLANTED[check](docs)
    assert CHECKS[check](docs)


def test_the_kubernetes_page_states_productions_arithmetic_as_computed(production):
    """The figures the page gives are this module's, so a change to the manifests that
    moves them fails here until the page says the new ones."""
    page = (K8S / "README.md").read_text()
    needed, _ = connections_needed(production)
    container = _mariadb(production)
    allowed, limit = _setting(container, "max-connections"), container["resources"]["limits"]["memory"]
    assert f"{needed} connections, under its\n`--max-connections={allowed}`" in page
    assert f"{memory_needed(container) // MIB:,} MiB within its {limit}" in page
