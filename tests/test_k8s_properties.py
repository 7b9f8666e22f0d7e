"""Properties a cluster needs of the manifests (deploy/k8s), each a check that lists
what breaks it, held on both overlays, and each shown to catch a fault of its kind
planted in the rendered production overlay: a schema-valid manifest can still be one
a cluster would not keep running."""

from __future__ import annotations

import copy
import re
import shutil
from collections.abc import Callable

import pytest

from stack.drill import DUMP_OPTIONS

from .test_k8s import IMAGE, K8S, OVERLAYS, container_of, of_kind, pod_specs, render, size_bytes

# What an HTTP liveness probe must not ask: the endpoints that ask the backends. A
# backend that is down is no reason to restart a process that answers (/livez is).
ASKS_BACKENDS = ("/readyz", "/healthz")
# Redis needs room beside its data past maxmemory: the AOF rewrite's fork copies each
# page written meanwhile (twice maxmemory at worst, under a sale's writes), and the
# server's own memory and the allocator's fragments come besides.
REDIS_BESIDES = 256 << 20


def _containers(template: dict) -> list[dict]:
    return template["spec"]["containers"] + template["spec"].get("initContainers", [])


def liveness_asking_backends(docs: list[dict]) -> list[str]:
    found = []
    for doc, template in pod_specs(docs):
        for container in template["spec"]["containers"]:
            http = container.get("livenessProbe", {}).get("httpGet")
            # nginx's every path but its own is an app's: a liveness through it asks them.
            if http and (http["path"] in ASKS_BACKENDS or container["image"].startswith("nginx")):
                found.append(f"{doc['metadata']['name']}/{container['name']}: {http['path']}")
    return found


def statefulsets_without_their_headless_service(docs: list[dict]) -> list[str]:
    services = of_kind(docs, "Service")
    return [f"{name}: {s['spec']['serviceName']}" for name, s in of_kind(docs, "StatefulSet").items()
            if services.get(s["spec"]["serviceName"], {}).get("spec", {}).get("clusterIP") != "None"]


def workloads_without_a_budget(docs: list[dict]) -> list[str]:
    """Every workload of more than one pod (or scaled by an autoscaler), and the
    database and the cache's Redis, whose one pod a sale's Jobs keep from a drain."""
    scaled = {a["spec"]["scaleTargetRef"]["name"] for a in of_kind(docs, "HorizontalPodAutoscaler").values()}
    budgets = [b["spec"]["selector"]["matchLabels"] for b in of_kind(docs, "PodDisruptionBudget").values()]
    found = []
    for doc in docs:
        if doc["kind"] not in ("Deployment", "StatefulSet"):
            continue
        name, spec = doc["metadata"]["name"], doc["spec"]
        if spec.get("replicas", 1) > 1 or name in scaled or name in ("mariadb", "redis"):
            labels = spec["template"]["metadata"]["labels"]
            if not any(selector.items() <= labels.items() for selector in budgets):
                found.append(name)
    return found


def containers_without_the_security_context(docs: list[dict]) -> list[str]:
    found = []
    for doc, template in pod_specs(docs):
        pod = template["spec"].get("securityContext", {})
        if not pod.get("runAsNonRoot") or pod.get("seccompProfile") != {"type": "RuntimeDefault"}:
            found.append(f"{doc['metadata']['name']}: the pod's")
        for container in _containers(template):
            context = container.get("securityContext", {})
            escalates = context.get("allowPrivilegeEscalation") is not False
            if escalates or context.get("capabilities") != {"drop": ["ALL"]}:
                found.append(f"{doc['metadata']['name']}/{container['name']}")
    return found


def redis_past_its_share_of_the_limit(docs: list[dict]) -> list[str]:
    found = []
    for name, statefulset in of_kind(docs, "StatefulSet").items():
        for container in statefulset["spec"]["template"]["spec"]["containers"]:
            args = container.get("args", [])
            if "--maxmemory" not in args:
                continue
            limit = size_bytes(container["resources"]["limits"]["memory"], "kubernetes")
            # A primary's replication backlog, where it sets one for its replicas.
            backlog = (size_bytes(args[args.index("--repl-backlog-size") + 1], "redis")
                       if "--repl-backlog-size" in args else 0)
            if 2 * size_bytes(args[args.index("--maxmemory") + 1], "redis") + backlog + REDIS_BESIDES > limit:
                found.append(f"{name}: maxmemory {args[args.index('--maxmemory') + 1]} of a "
                             f"{container['resources']['limits']['memory']} limit")
    return found


def probes_on_ports_nobody_listens_on(docs: list[dict]) -> list[str]:
    found = []
    for doc, template in pod_specs(docs):
        for container in template["spec"]["containers"]:
            ports = container.get("ports", [])
            names, numbers = {p.get("name") for p in ports}, {p["containerPort"] for p in ports}
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                probe = container.get(kind, {})
                target = (probe.get("httpGet") or probe.get("tcpSocket") or {}).get("port")
                if target is not None and target not in (names if isinstance(target, str) else numbers):
                    found.append(f"{doc['metadata']['name']}/{container['name']} {kind}: {target}")
    return found


def images_not_the_build(docs: list[dict], built: str) -> list[str]:
    """The app image everywhere the one the overlay builds (``built``); every other
    image a named release, never :latest or untagged."""
    found = []
    for doc, template in pod_specs(docs):
        for container in _containers(template):
            image = container["image"]
            name = image.split("@")[0].rsplit(":", 1)[0]
            if name.split("/")[-1] == IMAGE:
                if image != built:
                    found.append(f"{doc['metadata']['name']}/{container['name']}: {image}")
            elif "@sha256:" not in image and (":" not in image.split("/")[-1] or image.endswith(":latest")):
                found.append(f"{doc['metadata']['name']}/{container['name']}: {image}")
    return found


def pods_that_mount_a_token_they_do_not_use(docs: list[dict]) -> list[str]:
    """A pod that names no service account asks the Kubernetes API nothing: a token
    mounted in it is one a compromised process could use."""
    return [doc["metadata"]["name"] for doc, template in pod_specs(docs)
            if "serviceAccountName" not in template["spec"]
            and template["spec"].get("automountServiceAccountToken") is not False]


def jvms_past_their_share_of_the_limit(docs: list[dict]) -> list[str]:
    """A JVM's heap set, and within half of its container's limit: the JVM's own
    memory (threads, metaspace, buffers) comes on top of it."""
    found = []
    for doc, template in pod_specs(docs):
        for container in template["spec"]["containers"]:
            if not container["image"].startswith("zookeeper"):
                continue
            flags = {e["name"]: e.get("value", "") for e in container.get("env", [])}.get("JVMFLAGS", "")
            heap = re.search(r"-Xmx(\d+[kmgKMG])", flags)
            limit = size_bytes(container["resources"]["limits"]["memory"], "kubernetes")
            if heap is None or size_bytes(heap[1], "java") > limit / 2:
                found.append(f"{doc['metadata']['name']}: {flags or 'no heap set'}")
    return found


def cluster_settings_left_to_the_base(docs: list[dict]) -> list[str]:
    """What only the cluster knows is each overlay's: the Ingress controller's namespace
    (the base's placeholder lets nothing in) and the proxies nginx trusts (none)."""
    found = []
    policy = of_kind(docs, "NetworkPolicy")["nginx-from-the-ingress"]["spec"]["ingress"][0]["from"][0]
    if policy["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"].startswith("the-"):
        found.append("the Ingress controller's namespace")
    if not of_kind(docs, "ConfigMap")["flashsale-nginx"]["data"]["TRUSTED_PROXIES"]:
        found.append("TRUSTED_PROXIES")
    return found


def test_the_database_is_dumped_nightly_and_the_dump_leaves_the_cluster(rendered):
    """The backup reaches the database (its policy), as its own user (reads only) with
    the secret's password off its command line, dumps with the options the restore drill
    checks on the stack (``stack.drill.DUMP_OPTIONS``), then copies the dump to object
    storage outside the cluster, the one place besides the database its policy lets
    it reach (HTTPS)."""
    _, docs = rendered
    job = of_kind(docs, "CronJob")["mariadb-backup"]["spec"]
    template = job["jobTemplate"]["spec"]["template"]
    (dump,) = template["spec"]["initContainers"]
    script = dump["command"][-1]
    command = re.search(r"mariadb-dump (.*?) flashsale \|", script)
    assert command, script
    options = command.group(1).split()
    assert {"--host=mariadb", "--user=flashsale_backup", *DUMP_OPTIONS, "--master-data=2"} == set(options)
    assert "pipefail" in script and "--password" not in script
    assert {e["name"]: e["valueFrom"]["secretKeyRef"]["key"] for e in dump["env"]} == {
        "MYSQL_PWD": "MARIADB_BACKUP_PASSWORD"}
    (ship,) = template["spec"]["containers"]
    assert ship["image"].split(":")[0].endswith("rclone/rclone")
    assert ship["args"][:3] == ["copy", "/backup", "$(BACKUP_REMOTE)"] and "--immutable" in ship["args"]
    assert {"secretRef": {"name": "flashsale-backup-store"}} in ship["envFrom"]
    # Nothing it writes stays in the cluster: the dump's volume goes with the pod.
    assert all("persistentVolumeClaim" not in v for v in template["spec"]["volumes"])
    from .test_k8s import _egress

    assert _egress(docs, "mariadb-backup") == {("mariadb", 3306), ("internet", 443)}


def test_the_binary_log_leaves_the_cluster_as_it_is_written(rendered):
    """One follower of the log (tests/test_k8s_database_users.py runs its script on a
    real MariaDB) as the backup's user, the password off its command line, and a
    copier that sends its files to the bucket's binlog/ every minute; it reaches the
    database and HTTPS alone, and keeps nothing in the cluster."""
    _, docs = rendered
    deployment = of_kind(docs, "Deployment")["mariadb-binlog"]["spec"]
    assert deployment["replicas"] == 1 and deployment["strategy"] == {"type": "Recreate"}
    template = deployment["template"]
    follow, ship = template["spec"]["containers"]
    script = follow["command"][-1]
    assert "pipefail" in script and "--password" not in script
    for option in ("--read-from-remote-server", "--host=mariadb", "--user=flashsale_backup", "--raw",
                   "--stop-never"):
        assert option in script.split("mariadb-binlog", 1)[1], option
    assert {e["name"]: e["valueFrom"]["secretKeyRef"]["key"] for e in follow["env"]} == {
        "MYSQL_PWD": "MARIADB_BACKUP_PASSWORD"}
    assert ship["image"].split(":")[0].endswith("rclone/rclone")
    loop = ship["command"][-1]
    assert 'rclone copy /binlog "$BACKUP_REMOTE/binlog"' in loop and "sleep 60" in loop
    assert {"secretRef": {"name": "flashsale-backup-store"}} in ship["envFrom"]
    assert all("persistentVolumeClaim" not in v and "ephemeral" not in v for v in template["spec"]["volumes"])
    from .test_k8s import _egress

    assert _egress(docs, "mariadb-binlog") == {("mariadb", 3306), ("internet", 443)}


def redis_without_a_password(docs: list[dict]) -> list[str]:
    """Every Redis server asks its clients for the secret's password (and a cluster's
    replicas give it to their primaries)."""
    found = []
    for name, statefulset in of_kind(docs, "StatefulSet").items():
        for container in statefulset["spec"]["template"]["spec"]["containers"]:
            args = container.get("args", [])
            if not args or args[0] != "redis-server":
                continue
            env = {item["name"]: item.get("valueFrom", {}).get("secretKeyRef", {})
                   for item in container.get("env", [])}
            asks = "--requirepass" in args and args[args.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
            secret = env.get("REDIS_PASSWORD") == {"name": "flashsale-secrets", "key": "REDIS_PASSWORD"}
            replicas = "--cluster-enabled" not in args or "--masterauth" in args
            if not (asks and secret and replicas):
                found.append(name)
    return found


def gate_redis_answering_before_its_disk(docs: list[dict]) -> list[str]:
    """The gate's Redis fsyncs its append-only file before each reply: under
    ``everysec`` a crash can take back writes it answered, 201s among them."""
    found = []
    for container in of_kind(docs, "StatefulSet")["redis-gate"]["spec"]["template"]["spec"]["containers"]:
        args = container.get("args", [])
        if "redis-server" not in args:
            continue
        aof = {name: args[args.index(name) + 1] for name in ("--appendonly", "--appendfsync")
               if name in args}
        if aof != {"--appendonly": "yes", "--appendfsync": "always"}:
            found.append(container["name"])
    return found


# How long the binary log must reach back: to the last good dump, which the backup's
# alert lets be 26 hours old, with a week's margin for dumps that failed unseen.
BINLOG_KEPT_S = 7 * 86_400


def database_without_a_way_back(docs: list[dict]) -> list[str]:
    """MariaDB writes every row change to its binary log, flushed at each commit and
    kept past the dumps it would replay from: a dump's position (``--master-data``)
    and the log after it bring the database back to any moment since."""
    for statefulset in ("mariadb",):
        container = container_of(docs, "StatefulSet", statefulset, statefulset)
        args = dict(arg.removeprefix("--").partition("=")[::2] for arg in container["args"])
        kept = int(args.get("binlog-expire-logs-seconds", "0"))
        if not (args.get("log-bin") and args.get("binlog-format") == "ROW" and args.get("sync-binlog") == "1"
                and args.get("server-id") and kept >= BINLOG_KEPT_S):
            return [f"{statefulset}: {container['args']}"]
    return []


def _built(overlay: str) -> str:
    """The app image the overlay names (its kustomization's images entry, or the base's)."""
    import yaml

    for path in (K8S / "overlays" / overlay / "kustomization.yaml", K8S / "base" / "kustomization.yaml"):
        for image in yaml.safe_load(path.read_text()).get("images", []):
            if image["name"] == IMAGE:
                return f"{image.get('newName', IMAGE)}:{image['newTag']}"
    raise AssertionError("no image named flashsale-app in the kustomizations")


CHECKS: dict[str, Callable[[list[dict]], list[str]]] = {
    "liveness asks no backend": liveness_asking_backends,
    "every StatefulSet's serviceName is a headless Service": statefulsets_without_their_headless_service,
    "every multi-pod workload (and the database) has a budget": workloads_without_a_budget,
    "every container has the base's security context": containers_without_the_security_context,
    "Redis's limit holds twice its maxmemory (a fork's copies)": redis_past_its_share_of_the_limit,
    "probes ask ports their containers listen on": probes_on_ports_nobody_listens_on,
    "a pod that asks the Kubernetes API nothing mounts no token": pods_that_mount_a_token_they_do_not_use,
    "a JVM's heap is set within half its container's limit": jvms_past_their_share_of_the_limit,
    "the cluster's own settings are the overlay's": cluster_settings_left_to_the_base,
    "every Redis asks for the secret's password": redis_without_a_password,
    "the gate's Redis answers only what is on its disk": gate_redis_answering_before_its_disk,
    "the database keeps the binary log a recovery replays": database_without_a_way_back,
}


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request) -> tuple[str, list[dict]]:
    return request.param, render(K8S / "overlays" / request.param)


@pytest.mark.parametrize("check", CHECKS)
def test_the_manifests_hold(rendered, check):
    _, docs = rendered
    assert CHECKS[check](docs) == []


def test_every_image_is_the_build_or_a_named_release(rendered):
    overlay, docs = rendered
    assert images_not_the_build(docs, _built(overlay)) == []


def test_production_lists_every_image_where_a_release_pins_it(production):
    """Each image production runs is an entry of its kustomization's ``images``: one
    place to add the digests (the README's "Images by digest"), at the base's tag."""
    import yaml

    listed = {image["name"]: image for image in
              yaml.safe_load((K8S / "overlays/production/kustomization.yaml").read_text())["images"]}
    base = {}
    for doc in render(K8S / "base"):
        for _, template in pod_specs([doc]):
            for container in _containers(template):
                name, _, tag = container["image"].rpartition(":")
                base[name] = tag
    assert set(listed) == set(base)
    assert all(listed[name]["newTag"] == tag for name, tag in base.items() if name != IMAGE)


def test_the_migration_job_is_named_for_the_release_it_migrates_to(rendered):
    """A Job's template cannot change: the next release's apply creates its own. The
    release is the overlay's (``flashsale-release``), the app image's tag by custom."""
    overlay, docs = rendered
    version = of_kind(docs, "ConfigMap")["flashsale-release"]["data"]["version"]
    (job,) = [name for name in of_kind(docs, "Job") if name.startswith("flashsale-migrate")]
    assert job == f"flashsale-migrate-{version}"
    assert version == _built(overlay).rpartition(":")[2]


# A Job's name: a DNS subdomain (RFC 1123), at most 253 characters.
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@pytest.mark.parametrize("reference", [
    {"newName": "registry.example.com:5000/flashsale-app", "newTag": "1.0.0"},
    {"newName": "registry.example.com/flashsale-app", "digest": "sha256:" + "ab" * 32},
    {"newName": "registry.example.com:5000/flashsale-app", "newTag": "1.0.0",
     "digest": "sha256:" + "cd" * 32},
])
def test_the_migration_jobs_name_holds_whatever_form_the_image_takes(reference, tmp_path):
    """Pinned by digest (as the README's release step says), or from a registry on its
    own port, the image's reference has more colons: the Job's name stays the
    release's, and a name Kubernetes takes."""
    import yaml

    tree = tmp_path / "k8s"
    shutil.copytree(K8S, tree)
    kustomization = tree / "overlays" / "production" / "kustomization.yaml"
    config = yaml.safe_load(kustomization.read_text())
    [app] = [image for image in config["images"] if image["name"] == IMAGE]
    app.clear()
    app.update({"name": IMAGE, **reference})
    kustomization.write_text(yaml.safe_dump(config, sort_keys=False))
    docs = render(tree / "overlays" / "production")
    (job,) = [name for name in of_kind(docs, "Job") if name.startswith("flashsale-migrate")]
    assert job == "flashsale-migrate-1.0.0" and DNS_SUBDOMAIN.fullmatch(job) and len(job) <= 253
    image = container_of(docs, "Deployment", "flashsale-app", "app")["image"]
    assert image.startswith(reference["newName"])


def _plant_liveness(docs):
    container_of(docs, "Deployment", "flashsale-app")["livenessProbe"]["httpGet"]["path"] = "/readyz"


def _plant_service(docs):
    of_kind(docs, "StatefulSet")["mariadb"]["spec"]["serviceName"] = "mariadb-elsewhere"


def _plant_budget(docs):
    docs.remove(of_kind(docs, "PodDisruptionBudget")["flashsale-nginx"])


def _plant_context(docs):
    container_of(docs, "Deployment", "flashsale-persister")["securityContext"]["capabilities"] = {"drop": []}


def _plant_redis(docs):
    args = container_of(docs, "StatefulSet", "redis")["args"]
    args[args.index("--maxmemory") + 1] = "3gb"


def _plant_port(docs):
    container_of(docs, "Deployment", "flashsale-nginx")["readinessProbe"]["httpGet"]["port"] = 9999


def _plant_token(docs):
    spec = of_kind(docs, "Deployment")["flashsale-app"]["spec"]["template"]["spec"]
    del spec["automountServiceAccountToken"]


def _plant_heap(docs):
    env = container_of(docs, "StatefulSet", "zookeeper")["env"]
    env[:] = [e for e in env if e["name"] != "JVMFLAGS"]


def _plant_base_settings(docs):
    of_kind(docs, "ConfigMap")["flashsale-nginx"]["data"]["TRUSTED_PROXIES"] = ""


def _plant_open_redis(docs):
    args = container_of(docs, "StatefulSet", "redis-gate")["args"]
    del args[args.index("--requirepass"):args.index("--requirepass") + 2]


def _plant_everysec(docs):
    args = container_of(docs, "StatefulSet", "redis-gate")["args"]
    args[args.index("--appendfsync") + 1] = "everysec"


def _plant_no_binlog(docs):
    args = container_of(docs, "StatefulSet", "mariadb")["args"]
    args[:] = [arg for arg in args if not arg.startswith("--log-bin")]


PLANTED = {
    "liveness asks no backend": _plant_liveness,
    "every StatefulSet's serviceName is a headless Service": _plant_service,
    "every multi-pod workload (and the database) has a budget": _plant_budget,
    "every container has the base's security context": _plant_context,
    "Redis's limit holds twice its maxmemory (a fork's copies)": _plant_redis,
    "probes ask ports their containers listen on": _plant_port,
    "a pod that asks the Kubernetes API nothing mounts no token": _plant_token,
    "a JVM's heap is set within half its container's limit": _plant_heap,
    "the cluster's own settings are the overlay's": _plant_base_settings,
    "every Redis asks for the secret's password": _plant_open_redis,
    "the gate's Redis answers only what is on its disk": _plant_everysec,
    "the database keeps the binary log a recovery replays": _plant_no_binlog,
}


@pytest.mark.parametrize("check", CHECKS)
def test_a_planted_fault_of_each_kind_is_caught(production, check):
    docs = copy.deepcopy(production)
    PLANTED[check](docs)
    assert CHECKS[check](docs)


@pytest.mark.parametrize("image", ["flashsale-app:other", "registry.example.com/flashsale-app:latest",
                                   "redis:latest", "redis"])
def test_an_image_that_is_not_the_build_or_a_release_is_caught(production, image):
    docs = copy.deepcopy(production)
    target = "flashsale-persister" if "flashsale-app" in image else "redis"
    kind = "Deployment" if "flashsale-app" in image else "StatefulSet"
    container_of(docs, kind, target)["image"] = image
    assert images_not_the_build(docs, _built("production"))
