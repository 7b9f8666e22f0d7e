"""The cluster's monitoring (deploy/k8s/monitoring, for the Prometheus Operator): its
PodMonitors scrape pods that exist, on ports they have, under the job names the local
stack's Prometheus uses, so that every job a rule selects is scraped both on the stack
and in the cluster; its PrometheusRule is the rule files; Prometheus may reach what it
scrapes. Offline, like the rest of deploy/k8s."""

from __future__ import annotations

import re

import pytest
import yaml

from stack import prometheusrule
from stack.config import ROOT

from .test_k8s import K8S, OVERLAYS, of_kind, pod_specs, render

RULE_FILES = ("rules.yml", "rules-kubernetes.yml")


@pytest.fixture(scope="module")
def monitoring() -> list[dict]:
    return render(K8S / "monitoring")


def _selects(selector: dict, labels: dict) -> bool:
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", expression  # the only one written here
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def cluster_jobs(monitors: dict[str, dict], docs: list[dict]) -> dict[str, set[int]]:
    """The job each PodMonitor gives the pods it scrapes (their ``jobLabel``'s value,
    or the one a relabeling sets), with the ports scraped; each endpoint's port is
    checked to be one every such pod has, and each PodMonitor to select a pod."""
    jobs: dict[str, set[int]] = {}
    for name, monitor in monitors.items():
        spec = monitor["spec"]
        chosen = [template for _, template in pod_specs(docs)
                  if _selects(spec["selector"], template["metadata"]["labels"])]
        assert chosen, name
        for template in chosen:
            ports = {port["name"]: port["containerPort"] for container in template["spec"]["containers"]
                     for port in container.get("ports", [])}
            for endpoint in spec["podMetricsEndpoints"]:
                assert endpoint["port"] in ports, (name, template["metadata"]["labels"])
                named = [r["replacement"] for r in endpoint.get("relabelings", [])
                         if r.get("targetLabel") == "job"]
                job = named[-1] if named else template["metadata"]["labels"][spec["jobLabel"]]
                jobs.setdefault(job, set()).add(ports[endpoint["port"]])
    return jobs


def stack_jobs() -> set[str]:
    config = yaml.safe_load((ROOT / "stack/templates/prometheus.yml").read_text().replace("@{", "{"))
    return {job["job_name"] for job in config["scrape_configs"]}


def selected_jobs(*names: str) -> set[str]:
    """Every job the rules of these files name, in a matcher on ``job``."""
    text = "\n".join((ROOT / "monitoring" / name).read_text() for name in names)
    found = set(re.findall(r'\bjob="([^"]+)"', text))
    assert not re.search(r"\bjob(=~|!=|!~)", text), "a job matched otherwise: check it here"
    return found


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_job_a_rule_selects_is_scraped_on_the_stack_and_in_the_cluster(monitoring, overlay):
    jobs = cluster_jobs(of_kind(monitoring, "PodMonitor"), render(K8S / "overlays" / overlay))
    # As the stack's Prometheus names them: the flashsale processes, both Redis servers
    # and MariaDB; and ZooKeeper's own metrics, which the stack's ZooKeeper (Debian's)
    # cannot give: only the cluster's rules read them.
    assert {"app", "persister", "expirer", "racer", "redis", "redis-gate", "mysqld", "zookeeper"} == set(jobs)
    assert set(jobs) - {"zookeeper"} <= stack_jobs()
    both = selected_jobs("rules.yml")
    assert both and both <= set(jobs) & stack_jobs(), both
    cluster = selected_jobs("rules-kubernetes.yml")
    assert "zookeeper" in cluster and cluster <= set(jobs), cluster


def test_a_rule_that_selects_a_job_nothing_scrapes_is_caught(monitoring):
    """The check above, shown to fail: a job the stack has and no PodMonitor gives."""
    jobs = cluster_jobs(of_kind(monitoring, "PodMonitor"), render(K8S / "overlays" / "production"))
    assert "nginx" in stack_jobs() and "nginx" not in jobs


def test_the_prometheusrule_is_the_rule_files(monitoring):
    (rule,) = of_kind(monitoring, "PrometheusRule").values()
    groups = [group for name in RULE_FILES
              for group in yaml.safe_load((ROOT / "monitoring" / name).read_text())["groups"]]
    assert rule["spec"]["groups"] == groups
    assert prometheusrule.TARGET.read_text() == prometheusrule.rendered(), \
        "run `python -m stack prometheusrule`"


def test_prometheus_may_reach_what_it_scrapes_and_nothing_else(monitoring):
    (policy,) = of_kind(monitoring, "NetworkPolicy").values()
    allowed = {port["port"] for rule in policy["spec"]["ingress"] for port in rule["ports"]}
    scraped = set().union(*cluster_jobs(of_kind(monitoring, "PodMonitor"),
                                        render(K8S / "overlays" / "production")).values())
    assert allowed == scraped
    assert all(doc["metadata"]["namespace"] == "flashsale" for doc in monitoring)
