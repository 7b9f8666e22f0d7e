"""The Docker topology, checked without a Docker engine: the compose file as
docker-compose reads it, the nginx config in both modes, the Dockerfile linted."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests
import yaml
from django.conf import settings

from stack.config import ROOT, StackConfig
from stack.control import clean
from stack.scratch import free_port
from stack.servers import PROMETHEUS_QUERY_LIMITS, nginx

from .nginx_scratch import rendered as nginx_rendered
from .nginx_scratch import running_nginx

LONG_RUNNING = {"db", "redis", "redis-gate", "zookeeper", "app1", "app2", "persister", "racer", "expirer",
                "payprovider", "nginx", "locust-master", "prometheus", "grafana", "alertmanager", "pager"}
# Images of the exporter alone, no shell for a health check: Prometheus' `up` is theirs.
EXPORTERS = {"redis-exporter", "mysqld-exporter", "nginx-exporter", "edge-exporter"}


# What the compose file reads from the environment: the suite's own (a lane's
# NGINX_PORT, say) must not reach it.
READ = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", (ROOT / "docker-compose.yml").read_text()))


def rendered(**env) -> dict:
    """docker-compose.yml as Debian's docker-compose v1 resolves it (anchors,
    defaults, profiles) with nothing of ours set but ``env``; it exits non-zero on
    a key the Compose spec lacks."""
    clean = {k: v for k, v in os.environ.items() if k not in READ}
    result = subprocess.run(["docker-compose", "-f", "docker-compose.yml", "config"], cwd=ROOT,
                            capture_output=True, text=True, env={**clean, "FLASHSALE_STRATEGY": "", **env})
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


@pytest.fixture(scope="module")
def compose() -> dict:
    return rendered()


@pytest.mark.system
def test_the_services_of_the_topology(compose):
    assert set(compose["services"]) == LONG_RUNNING | EXPORTERS | {"migrate", "locust-worker"}
    assert compose["services"]["db"]["image"].startswith(("mariadb:", "mysql:"))
    for name in ("migrate", "app1", "app2", "persister", "racer", "expirer", "payprovider", "pager",
                 "locust-master", "locust-worker"):
        assert compose["services"][name]["build"]["context"] == str(ROOT)
    assert compose["services"]["locust-worker"]["command"][-2:] == ["--master-host", "locust-master"]


@pytest.mark.system
def test_prometheus_sends_its_alerts_to_the_alertmanager_that_pages_the_pager(compose):
    prometheus = yaml.safe_load((ROOT / "monitoring/prometheus-compose.yml").read_text())
    targets = [target for manager in prometheus["alerting"]["alertmanagers"]
               for config in manager["static_configs"] for target in config["targets"]]
    assert targets == ["alertmanager:9093"]
    alertmanager = yaml.safe_load((ROOT / "monitoring/alertmanager-compose.yml").read_text())
    urls = [w["url"] for r in alertmanager["receivers"] for w in r.get("webhook_configs", [])]
    pager = compose["services"]["pager"]["command"]
    # Pages, warnings and the heartbeat: each receiver is the compose file's pager.
    assert len(alertmanager["receivers"]) == len(urls) == 3 and "--host=0.0.0.0" in pager
    assert set(urls) == {f"http://pager:{pager[-1].removeprefix('--port=')}/alerts"}


def published(compose: dict) -> dict[str, list[str]]:
    return {name: [p if isinstance(p, str) else f"{p.get('host_ip', '')}:{p['published']}:{p['target']}"
                   for p in svc.get("ports", [])]
            for name, svc in compose["services"].items()}


@pytest.mark.system
def test_ports_nginx_8080_and_locust_8089_on_loopback_only_by_default(compose):
    ports = published(compose)
    assert ports["nginx"] == ["127.0.0.1:8080:8080/tcp"]
    assert ports["locust-master"] == ["127.0.0.1:8089:8089/tcp"]
    assert ports["grafana"] == ["127.0.0.1:3000:3000/tcp"]
    assert not any(ports[name] for name in ports if name not in ("nginx", "locust-master", "grafana"))


@pytest.mark.system
def test_no_well_known_credential_reaches_an_app_published_beyond_loopback():
    compose = rendered(NGINX_BIND="0.0.0.0")
    assert published(compose)["nginx"] == ["0.0.0.0:8080:8080/tcp"]
    assert published(compose)["grafana"] == ["127.0.0.1:3000:3000/tcp"]  # loopback, whatever NGINX_BIND says
    grafana = compose["services"]["grafana"]["environment"]
    assert (grafana["GF_AUTH_DISABLE_LOGIN_FORM"], grafana["GF_AUTH_BASIC_ENABLED"],
            grafana["GF_AUTH_ANONYMOUS_ORG_ROLE"]) == ("true", "false", "Viewer")
    for name in ("migrate", "app1", "app2", "persister", "racer", "expirer"):
        env = compose["services"][name]["environment"]
        assert env["FLASHSALE_PUBLIC_BIND"] == "0.0.0.0"
        # No token or key of the file's own: empty, which the settings refuse there
        # (tests/test_settings.py), as they refuse the database's default.
        assert env["FLASHSALE_ADMIN_TOKEN"] == "" and env["DJANGO_SECRET_KEY"] == ""
        assert env["DATABASE_URL"].split(":")[2].split("@")[0] in settings.WELL_KNOWN_SECRETS
        # The stand-in's webhook secret: refused there too, so a payment cannot be forged.
        assert env["FLASHSALE_PAYMENTS_WEBHOOK_SECRET"] in settings.WELL_KNOWN_WEBHOOK_SECRETS


@pytest.mark.system
def test_every_long_running_service_has_a_health_check(compose):
    for name in LONG_RUNNING:
        check = compose["services"][name].get("healthcheck", {})
        assert check.get("test") and not check.get("disable"), name


@pytest.mark.system
def test_instances_wait_for_healthy_backends_and_one_migration(compose):
    for name in ("app1", "app2"):
        depends = compose["services"][name]["depends_on"]
        assert depends == {"db": {"condition": "service_healthy"},
                           "redis": {"condition": "service_healthy"},
                           "redis-gate": {"condition": "service_healthy"},
                           "zookeeper": {"condition": "service_healthy"},
                           "migrate": {"condition": "service_completed_successfully"}}
    migrate = compose["services"]["migrate"]
    assert migrate["command"][-1].endswith("python manage.py migrate --noinput")
    assert "migrate" not in migrate["depends_on"]
    nginx_depends = compose["services"]["nginx"]["depends_on"]
    assert nginx_depends == {"app1": {"condition": "service_healthy"},
                             "app2": {"condition": "service_healthy"}}
    # The edge's exporter reads the file nginx writes the purchases' lines into.
    edge = compose["services"]["edge-exporter"]
    log = compose["services"]["nginx"]["environment"]["EDGE_LOG"]
    assert f"--logs={log}" in edge["command"]
    assert edge["depends_on"] == {"nginx": {"condition": "service_healthy"}}


@pytest.mark.system
def test_static_files_are_collected_once_into_a_volume_that_nginx_serves(compose):
    migrate, nginx = compose["services"]["migrate"], compose["services"]["nginx"]
    assert "collectstatic --noinput" in migrate["command"][-1]
    # docker-compose v1 renders a named volume as "name:target:mode".
    assert "static:/app/static:rw" in migrate["volumes"]
    assert "static:/srv/static:ro" in nginx["volumes"]
    assert nginx["environment"]["STATIC_ROOT"] == "/srv/static"
    assert "static" in compose["volumes"]
    assert "collectstatic" in (ROOT / "Dockerfile").read_text()  # the image carries them too


@pytest.mark.system
def test_two_persisters_write_the_gate_whose_redis_is_its_own_and_never_evicts(compose):
    persister = compose["services"]["persister"]
    assert persister["command"][:3] == ["python", "manage.py", "persist_orders"]
    assert persister["deploy"]["replicas"] == 2
    assert persister["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    for name in ("app1", "app2", "persister"):
        assert compose["services"][name]["environment"]["FLASHSALE_GATE_REDIS_URL"] == "redis://redis-gate:6379/0"
    gate = compose["services"]["redis-gate"]["command"]
    assert gate[gate.index("--appendonly") + 1] == "yes"
    assert gate[gate.index("--appendfsync") + 1] == "always"  # a crash takes back no 201
    assert gate[gate.index("--maxmemory-policy") + 1] == "noeviction" and "--maxmemory" in gate
    # Kept across containers.
    assert compose["services"]["redis-gate"]["volumes"] == ["redis-gate-data:/data:rw"]
    cache = compose["services"]["redis"]["command"]
    assert cache[cache.index("--maxmemory-policy") + 1] == "volatile-lru" and "--maxmemory" in cache


@pytest.mark.system
def test_the_strategy_is_one_variable_named_as_in_the_local_stack(compose):
    text = (ROOT / "docker-compose.yml").read_text()
    assert text.count("${FLASHSALE_STRATEGY:-atomic}") == 1  # one place, shared by every app service
    for name in ("migrate", "app1", "app2"):
        assert compose["services"][name]["environment"]["FLASHSALE_STRATEGY"] == "atomic"
    assert compose["services"]["app1"]["environment"]["FLASHSALE_INSTANCE"] == "app1"
    assert compose["services"]["app2"]["environment"]["FLASHSALE_INSTANCE"] == "app2"
    assert "FLASHSALE_STRATEGY=" in (ROOT / ".env.example").read_text()


@pytest.mark.system
def test_the_server_is_one_variable_named_as_in_the_local_stack():
    assert (ROOT / "docker-compose.yml").read_text().count("${FLASHSALE_SERVER:-gunicorn}") == 1
    for server in ("", "granian"):
        services = rendered(FLASHSALE_SERVER=server)["services"]
        for name in ("app1", "app2"):
            assert services[name]["environment"]["FLASHSALE_SERVER"] == (server or "gunicorn")
    assert "FLASHSALE_SERVER=" in (ROOT / ".env.example").read_text()


@pytest.mark.system
def test_load_test_services_are_behind_a_profile(compose):
    for name in ("locust-master", "locust-worker"):
        assert compose["services"][name]["profiles"] == ["loadtest"]


def nginx_t(conf: Path, prefix: Path) -> subprocess.CompletedProcess:
    binary = shutil.which("nginx", path=os.environ["PATH"] + ":/usr/sbin")
    return subprocess.run([binary, "-t", "-c", str(conf), "-p", str(prefix), "-e", str(prefix / "error.log")],
                           capture_output=True, text=True)


@pytest.mark.system
def test_nginx_config_of_the_local_launcher_is_valid(tmp_path):
    config = StackConfig.from_env().replace(run_dir=tmp_path)
    try:
        server = nginx(config)
        conf = Path(server.command[server.command.index("-c") + 1])
        result = nginx_t(conf, conf.parent)
        text = conf.read_text()
    finally:
        clean(config)  # the directories its config names, made outside the run directory
    assert result.returncode == 0, result.stderr
    assert f"listen 127.0.0.1:{config.nginx_port};" in text
    assert text.count("server 127.0.0.1:") == config.instances  # and nothing of Prometheus's
    assert "location @too_large {" in text and "@@" not in text  # nginx's named locations


@pytest.mark.system
def test_nginx_config_rendered_for_docker_is_valid(tmp_path):
    # Docker's service names only resolve inside its network: check the same
    # template with loopback addresses in their place.
    result = subprocess.run(["sh", str(ROOT / "nginx/render.sh")], capture_output=True, text=True,
                            env={**os.environ, "RENDER_ONLY": "1", "RUN_DIR": str(tmp_path),
                                 "UPSTREAMS": "127.0.0.1:8101 127.0.0.1:8102", "NGINX_PORT": "8080",
                                 "STATUS_LISTEN": "127.0.0.1:9113", "EDGE_LOG": str(tmp_path / "edge.log")})
    assert result.returncode == 0, result.stderr
    conf = Path(result.stdout.strip())
    text = conf.read_text()
    assert "listen 8080;" in text and "@{" not in text
    assert f"access_log {tmp_path / 'edge.log'} json if=$purchase_line;" in text
    assert "location @too_large {" in text and "@@" not in text
    assert re.findall(r"server (\S+);", text) == ["127.0.0.1:8101", "127.0.0.1:8102"]
    assert "listen 127.0.0.1:9113;" in text and "stub_status;" in text
    check = nginx_t(conf, tmp_path)
    assert check.returncode == 0, check.stderr


@pytest.mark.server  # it starts an nginx of its own
def test_on_the_race_port_the_rates_count_each_buyer_not_the_runners_address(tmp_path):
    """RACE_LISTEN (the Kubernetes race runner's port): one address, many buyers."""
    port, race = free_port(), free_port()
    conf = nginx_rendered(tmp_path, port, RACE_LISTEN=f"127.0.0.1:{race}", PURCHASE_RATE="1")
    with running_nginx(conf, tmp_path, port):
        def buys(at: int, buyer: str) -> list[int]:
            return [requests.post(f"http://127.0.0.1:{at}/api/orders", json={"sku": "s", "quantity": 1},
                                  headers={"Host": "localhost", "Authorization": f"Bearer {buyer}"},
                                  timeout=5).status_code for _ in range(3)]

        # The rate and one second's burst, then 429: per buyer on the race port...
        assert [buys(race, buyer) for buyer in ("t1", "t2", "t3")] == [[502, 502, 429]] * 3
        # ...and per address on the buyers' port, where the three share one bucket.
        assert buys(port, "t4") + buys(port, "t5") == [502, 502, 429, 429, 429, 429]


def test_dockerfile_passes_hadolint():
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run([str(hadolint), "Dockerfile"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_runs_as_non_root_from_a_pinned_base_without_secrets():
    text = (ROOT / "Dockerfile").read_text()
    bases = re.findall(r"^FROM (\S+)", text, flags=re.M)
    assert bases and all(":" in b and not b.endswith(":latest") for b in bases)
    users = re.findall(r"^USER (\S+)", text, flags=re.M)
    assert users and users[-1] not in ("root", "0")
    assert not re.search(r"(PASSWORD|SECRET|TOKEN)\s*=", text)
    assert "migrate" not in re.findall(r"^CMD .*", text, flags=re.M)[0]  # migrations: once, in compose


@pytest.mark.system
def test_the_race_runner_sends_its_buyers_to_the_stacks_own_nginx(compose):
    racer = compose["services"]["racer"]
    assert racer["command"][:4] == ["python", "manage.py", "run_races", "--name=racer"]
    assert racer["environment"]["FLASHSALE_RACE_TARGET"] == "http://nginx:8080"
    assert racer["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    assert "deploy" not in racer  # one: one race at a time


@pytest.mark.system
def test_every_process_is_scraped_as_the_local_stack_scrapes_it(compose, tmp_path):
    """The compose Prometheus: the local stack's jobs and rules, and a config promtool
    accepts; every app instance keeps its workers' metrics in one directory, and every
    persister and the race runner serve theirs to the compose network."""
    config = yaml.safe_load((ROOT / "monitoring/prometheus-compose.yml").read_text())
    local = yaml.safe_load((ROOT / "stack/templates/prometheus.yml").read_text().replace("@{", "{"))
    assert [job["job_name"] for job in config["scrape_configs"]] == \
        [job["job_name"] for job in local["scrape_configs"]]
    prometheus = compose["services"]["prometheus"]
    assert f"{ROOT}/monitoring/rules.yml:/etc/prometheus/rules.yml:ro" in prometheus["volumes"]
    # The local stack's bounds on queries, the same.
    assert set(PROMETHEUS_QUERY_LIMITS) <= set(prometheus["command"])
    for app in ("app1", "app2"):  # the dashboard's data is asked of it by the apps
        assert compose["services"][app]["environment"]["FLASHSALE_PROMETHEUS_URL"] == "http://prometheus:9090"
    (tmp_path / "rules.yml").write_text((ROOT / "monitoring/rules.yml").read_text())
    config["rule_files"] = [str(tmp_path / "rules.yml")]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    checked = subprocess.run(["promtool", "check", "config", str(tmp_path / "prometheus.yml")],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for name in ("app1", "app2"):
        environment = compose["services"][name]["environment"]
        assert environment["PROMETHEUS_MULTIPROC_DIR"] == "/tmp/flashsale-metrics"
    assert '"flashsale.serve"' in re.findall(r"^CMD .*", (ROOT / "Dockerfile").read_text(), flags=re.M)[0]
    for name in ("persister", "racer", "expirer"):
        command = compose["services"][name]["command"]
        assert "--metrics-port=9100" in command and "--metrics-address=0.0.0.0" in command


def test_grafana_shows_the_panels_the_dashboard_page_draws():
    """monitoring/grafana/dashboards/flashsale.json is what `python -m dashboard.grafana`
    writes from dashboard.panels: run it after changing a panel."""
    from dashboard.grafana import OUT, rendered
    from dashboard.panels import PANELS

    assert OUT.read_text() == rendered()
    shown = json.loads(OUT.read_text())
    assert [[t["expr"] for t in panel["targets"]] for panel in shown["panels"]] == \
        [[q.expr for q in panel.queries] for panel in PANELS]
    source = yaml.safe_load((ROOT / "monitoring/grafana/provisioning/datasources/prometheus.yml").read_text())
    assert {d["uid"] for d in source["datasources"]} == {t["datasource"]["uid"] for p in shown["panels"]
                                                         for t in p["targets"]}
