"""Each flashsale process holds the secrets its kind uses and no other
(``flashsale/settings/processes.py``): every container of the manifests takes exactly
its kind's keys of ``flashsale-secrets``, the production settings refuse to start a
kind without its own, and each kind does its work on real servers with nothing but
what its container is given."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flashsale.settings.processes import PROCESSES
from stack.config import ROOT
from stack.scratch import free_port
from stack.servers import binary

from .forked import python
from .test_k8s import K8S, _stand_in, environment, flashsale_containers, render
from .test_k8s_database_users import scratch_database

# The kind each command's process is. The app pod's wait for the schema reads the
# gate's Redis too (schema_ready), and it runs beside the app: the app's kind.
KIND_OF_COMMAND = {"flashsale.serve": "web", "schema_ready": "web", "migrate": "schema",
                   "persist_orders": "persister", "expire_orders": "expirer", "run_races": "racer",
                   "buyers_make": "buyers"}


def kind_of(container: dict) -> str | None:
    """The kind of process the container runs; None for one that runs no Django (Locust's)."""
    command = " ".join(container["command"])
    kinds = {kind for word, kind in KIND_OF_COMMAND.items() if re.search(rf"\b{word}\b", command)}
    assert len(kinds) <= 1, command
    return kinds.pop() if kinds else None


def secrets_taken(container: dict) -> dict[str, bool]:
    """The keys of flashsale-secrets the container takes, each with whether it may be absent."""
    refs = [item["valueFrom"]["secretKeyRef"] for item in container.get("env", [])
            if "secretKeyRef" in item.get("valueFrom", {})]
    return {ref["key"]: ref.get("optional", False) for ref in refs if ref["name"] == "flashsale-secrets"}


def containers() -> list[tuple[str, dict, dict]]:
    """(where, the object, the container) of every flashsale process in both overlays and
    the load directory."""
    found = []
    for directory in (K8S / "overlays" / "small", K8S / "overlays" / "production", K8S / "load"):
        docs = render(directory)
        found += [(f"{directory.name}: {doc['metadata']['name']}/{container['name']}", doc, container)
                  for doc, _, container in flashsale_containers(docs)]
    return found


def test_each_container_takes_its_kinds_secrets_and_no_other():
    kinds = set()
    for where, _, container in containers():
        assert not [source for source in container.get("envFrom", []) if "secretRef" in source], where
        env = container.get("env", [])
        named = [item.get("value") for item in env if item["name"] == "FLASHSALE_PROCESS"]
        kind = kind_of(container)
        if kind is None:  # Locust: no Django, no secret
            assert named == [] and secrets_taken(container) == {}, where
            continue
        assert named == [kind], where
        wanted = PROCESSES[kind]
        assert secrets_taken(container) == {**dict.fromkeys(wanted.needs, False),
                                            **dict.fromkeys(wanted.may, True)}, where
        kinds.add(kind)
    assert kinds == set(PROCESSES)


def test_the_secret_the_readme_creates_holds_every_key_a_kind_needs():
    readme = (K8S / "README.md").read_text()
    (block,) = re.findall(r"create secret generic flashsale-secrets \\\n((?:.*\\\n)*.*\n)", readme)
    created = set(re.findall(r"--from-literal=(\w+)=", block))
    assert created == {name for process in PROCESSES.values() for name in process.needs}
    for process in PROCESSES.values():
        assert all(f"`{name}`" in readme for name in process.may)


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "FLASHSALE_"))
             and k not in [name for process in PROCESSES.values() for name in process.secrets]}
    env = {**clean, "DJANGO_SETTINGS_MODULE": "flashsale.settings.production",
           "FLASHSALE_PER_USER_LIMIT": "2", **env}
    return python(["manage.py", *args], env=env)


STRONG = {"DJANGO_SECRET_KEY": "k" * 50, "FLASHSALE_ADMIN_TOKEN": "t" * 43, "REDIS_PASSWORD": "r" * 32,
          "ZOOKEEPER_AUTH": "flashsale:" + "z" * 32}
DATABASE = {"DATABASE_URL": "mysql://flashsale_app:" + "a" * 32 + "@db:3306/flashsale"}


@pytest.mark.parametrize("kind", [kind for kind, process in PROCESSES.items() if process.needs])
def test_the_production_settings_refuse_a_kind_without_its_secrets_naming_them(kind):
    """One line names every secret the kind needs. That each kind starts with them is
    held by tests/test_k8s.py, which loads every container's environment as given."""
    needs = PROCESSES[kind].needs
    refused = manage("check", FLASHSALE_PROCESS=kind, **DATABASE)
    [line] = [line for line in refused.stderr.splitlines() if "refusing to start" in line]
    assert f"(FLASHSALE_PROCESS={kind}) while {', '.join(needs)} {'are' if len(needs) > 1 else 'is'} " \
           "missing" in line, line


def test_an_unknown_kind_is_refused_naming_the_kinds():
    refused = manage("check", FLASHSALE_PROCESS="worker", **DATABASE, **STRONG)
    assert refused.returncode != 0
    assert f"unknown FLASHSALE_PROCESS 'worker'; choose one of: {', '.join(PROCESSES)}" in refused.stderr


def _on_scratch(env: dict[str, str], database_port: int, redis_port: int, tmp: Path) -> dict[str, str]:
    """The container's environment with the cluster's services moved to the scratch
    servers on this machine."""
    moved = {}
    for name, value in env.items():
        value = value.replace("@mariadb:3306/", f"@127.0.0.1:{database_port}/")
        value = re.sub(r"redis://(redis|redis-gate):6379/", f"redis://127.0.0.1:{redis_port}/", value)
        moved[name] = value
    moved["PROMETHEUS_MULTIPROC_DIR"] = str(tmp / "metrics")
    (tmp / "metrics").mkdir(exist_ok=True)
    return moved


def _runs(command: list[str], env: dict[str, str], alive: Path, seconds: float = 60) -> str:
    """Start ``command``; "" once it has touched ``alive`` (its loop turned), else why not."""
    process = subprocess.Popen(command, cwd=ROOT, env={"PATH": os.environ["PATH"], **env},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + seconds
    try:
        while not alive.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        turned = alive.exists() and process.poll() is None
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=30)
    return "" if turned else output[-3000:]


@pytest.mark.server  # a MariaDB and a Redis of its own
def test_each_kind_does_its_work_with_only_what_its_container_is_given(tmp_path):
    docs = render(K8S / "overlays" / "small")
    load = render(K8S / "load")
    by_kind = {}
    for doc, _, container in [*flashsale_containers(docs), *flashsale_containers(load)]:
        if (kind := kind_of(container)) is not None:
            by_kind.setdefault(kind, (doc, container))
    password = _stand_in("REDIS_PASSWORD")  # the Secret's, which the Redis servers require
    redis_port = free_port()
    redis = subprocess.Popen([binary("redis-server"), "--port", str(redis_port), "--bind", "127.0.0.1",
                              "--requirepass", password, "--save", "", "--appendonly", "no"],
                             stdout=subprocess.DEVNULL)
    try:
        with scratch_database() as (_, database_port):
            def env_of(kind: str) -> dict[str, str]:
                doc, container = by_kind[kind]
                # The load's Job reads the overlay's ConfigMap.
                return _on_scratch(environment([*docs, *load], container, f"{doc['metadata']['name']}-0"),
                                   database_port, redis_port, tmp_path)

            # schema: the wait for the migrations, as the processes' own user
            waited = subprocess.run([sys.executable, "manage.py", "migrate", "--check"], cwd=ROOT,
                                    env={"PATH": os.environ["PATH"], **env_of("schema")},
                                    capture_output=True, text=True, timeout=120)
            assert waited.returncode == 0, waited.stdout[-2000:] + waited.stderr[-2000:]
            # persister and expirer: each loop turns
            for kind, command in (("persister", "persist_orders"), ("expirer", "expire_orders")):
                alive = tmp_path / f"{kind}-alive"
                why = _runs([sys.executable, "manage.py", command, f"--alive-file={alive}"], env_of(kind),
                            alive)
                assert why == "", f"{kind}: {why}"
            # buyers: its tokens signed with its own key
            out = tmp_path / "buyers.tsv"
            made = subprocess.run([sys.executable, "manage.py", "buyers_make", "2", "--out", str(out),
                                   "--prefix", "secrets-", "--hours", "1"], cwd=ROOT,
                                  env={"PATH": os.environ["PATH"], **env_of("buyers")},
                                  capture_output=True, text=True, timeout=120)
            assert made.returncode == 0, made.stderr[-2000:]
            assert len(out.read_text().split()) == 4
            # A kind that holds no key signs nothing: Django refuses its empty key.
            unsigned = subprocess.run([sys.executable, "manage.py", "buyers_make", "1", "--out",
                                       str(tmp_path / "none.tsv"), "--prefix", "unsigned-", "--hours", "1"],
                                      cwd=ROOT, env={"PATH": os.environ["PATH"], **env_of("schema")},
                                      capture_output=True, text=True, timeout=120)
            assert unsigned.returncode != 0
            assert "The SECRET_KEY setting must not be empty" in unsigned.stderr, unsigned.stderr[-2000:]
    finally:
        redis.terminate()
        redis.wait(30)
