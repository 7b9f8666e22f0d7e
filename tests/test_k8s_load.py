"""The cluster's load (deploy/k8s/load): a Locust master and workers that run the
image's locustfile with options Locust and the locustfile accept, the buyers' tokens
made by a Job into the Secret the workers read, and policies that let the workers
alone of it reach nginx's buyers' port. Offline, like the rest of deploy/k8s."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from stack.config import ROOT

from .test_k8s import K8S, _app_of, container_of, of_kind, pod_specs, refused, render

LOAD = K8S / "load"


@pytest.fixture(scope="module")
def load() -> list[dict]:
    return render(LOAD)


MASTER = ("Deployment", "flashsale-locust-master")
WORKER = ("Deployment", "flashsale-locust-worker")
BUYERS = ("Job", "flashsale-load-buyers")


def locust_options(args: list[str]) -> dict:
    """``args`` parsed as Locust parses them with the locustfile's own options (in a
    process of its own: Locust patches the standard library as it loads)."""
    script = ("import json, sys\n"
              "from locust import argument_parser\n"
              "from locust.util.load_locustfile import load_locustfile\n"
              "load_locustfile('loadtest/locustfile.py')\n"
              "options = argument_parser.parse_options(args=json.loads(sys.argv[1]))\n"
              "kept = {k: v for k, v in vars(options).items() if isinstance(v, (str, int, bool))}\n"
              "print(json.dumps(kept))\n")
    done = subprocess.run([sys.executable, "-c", script, json.dumps(args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_load_renders_and_every_object_is_valid_for_the_pinned_kubernetes(load):
    assert {doc["kind"] for doc in load} >= {"Deployment", "Service", "Job", "NetworkPolicy", "Role"}
    assert refused(load) == []
    assert {doc["metadata"]["namespace"] for doc in load} == {"flashsale"}


def test_the_master_and_workers_run_the_images_locustfile_with_options_it_takes(load):
    master = locust_options(container_of(load, *MASTER, "locust")["command"][1:])
    worker = locust_options(container_of(load, *WORKER, "locust")["command"][1:])
    assert master["locustfile"] == worker["locustfile"] == "loadtest/locustfile.py"
    assert (ROOT / master["locustfile"]).exists()  # the image holds the checkout
    assert master["master"] and worker["worker"]
    # The workers find the master through its Service, on the port it binds.
    services = of_kind(load, "Service")
    ports = {p["name"]: p["port"] for p in services[worker["master_host"]]["spec"]["ports"]}
    assert worker["master_port"] == master["master_bind_port"] == ports["workers"]
    assert master["web_port"] == ports["web"]
    # nginx's buyers' port, where the rates count each buyer.
    assert master["host"] == "http://flashsale-nginx:8081"


def test_the_workers_read_the_tokens_the_job_made(load):
    make = container_of(load, *BUYERS, "make")["command"]
    assert make[:3] == ["python", "manage.py", "buyers_make"]
    from django.core.management import load_command_class

    parser = load_command_class(_app_of(make[2]), make[2]).create_parser("manage.py", make[2])
    made = parser.parse_args(make[3:])
    # The master's --tokens goes to every worker with each run.
    tokens = locust_options(container_of(load, *MASTER, "locust")["command"][1:])["tokens"]
    mounts = container_of(load, *WORKER, "locust")["volumeMounts"]
    mount = {m["name"]: m["mountPath"] for m in mounts}["tokens"]
    worker = of_kind(load, WORKER[0])[WORKER[1]]["spec"]["template"]
    secret = {v["name"]: v.get("secret", {}).get("secretName") for v in worker["spec"]["volumes"]}["tokens"]
    store = container_of(load, *BUYERS, "store")["args"]
    assert store[:4] == ["create", "secret", "generic", secret]
    assert store[4] == f"--from-file={tokens.removeprefix(mount + '/')}={made.out}"
    assert container_of(load, *BUYERS, "forget")["args"][:3] == ["delete", "secret", secret]
    # What the Job may do with Secrets beyond creating one: that Secret, nothing else.
    [role] = of_kind(load, "Role").values()
    assert [rule["resourceNames"] for rule in role["rules"] if "resourceNames" in rule] == [[secret]]


def test_only_the_workers_of_the_load_reach_nginxs_buyers_port_and_they_reach_nothing_else(load):
    policies = of_kind(load, "NetworkPolicy")
    into_nginx = [(rule["from"], rule["ports"]) for policy in policies.values()
                  if policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/component": "nginx"}
                  for rule in policy["spec"].get("ingress", [])]
    assert into_nginx == [([{"podSelector": {"matchLabels": {"app.kubernetes.io/component": "load-worker"}}}],
                           [{"port": 8081}])]
    egress = policies["load-worker-egress"]["spec"]["egress"]
    assert [(rule["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"], rule["ports"])
            for rule in egress] == [("nginx", [{"port": 8081}]), ("load-master", [{"port": 5557}])]


def test_the_load_runs_the_image_the_production_overlay_deploys():
    production = render(K8S / "overlays" / "production")
    images = {c["image"] for _, t in pod_specs(production) for c in t["spec"]["containers"]
              if "flashsale-app" in c["image"]}
    assert {container_of(render(LOAD), *WORKER, "locust")["image"]} == images
