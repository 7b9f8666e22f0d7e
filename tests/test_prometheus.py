"""The stack's Prometheus (stack/servers.py): its config and rules load in promtool,
every process it scrapes is up, every recording rule has data after a short sale,
and the gate's backlog it sees rises while the persisters are paused and falls to 0
once they catch up. (The alerts' unit tests, at each scrape interval: test_alerts.py.)"""

import math
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
import requests
import yaml

from dashboard.panels import PANELS
from stack.config import ROOT
from stack.control import up
from stack.supervisor import Supervisor

from .test_metrics import scraped

# Every test here reads the stack's watchers: make test starts them for these (conftest.py).
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("stack_watchers")]

RULES = ROOT / "monitoring/rules.yml"


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60)


def query(config, expr: str) -> list[dict]:
    response = requests.get(f"http://127.0.0.1:{config.prometheus_port}/api/v1/query",
                            params={"query": expr}, timeout=10)
    response.raise_for_status()
    return response.json()["data"]["result"]


def eventually(check, *, seconds: float = 30, every: float = 0.5):
    """``check()``'s value once truthy; its last value after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not (value := check()) and time.monotonic() < deadline:
        time.sleep(every)
    return value


def test_the_config_and_the_rules_load(stack_config):
    checked = promtool("check", "config", str(stack_config.run_dir / "prometheus" / "prometheus.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_running_stacks_up_has_prometheus_and_alertmanager_read_their_files_again(stack_config):
    """An edited rule or route reaches them through `make up`, which writes their files
    anew: supervisord's config names neither file, so nothing else would restart them."""
    def reloaded() -> dict[str, float]:
        found = {}
        for name, port in (("prometheus", stack_config.prometheus_port),
                           ("alertmanager", stack_config.alertmanager_port)):
            text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            (line,) = [line for line in text.splitlines()
                       if line.startswith(f"{name}_config_last_reload_success_timestamp_seconds ")]
            found[name] = float(line.split()[1])
        return found

    before = reloaded()
    time.sleep(1.1)  # the timestamps are in whole seconds
    up(stack_config)
    # Each reloads when its loop takes the signal, after up() returns.
    assert eventually(lambda: all(reloaded()[name] > before[name] for name in before), seconds=20), \
        (before, reloaded())


def test_every_process_of_the_stack_is_scraped(stack_apps, stack_config):
    stack_apps()  # every instance the stack names running: an earlier test may have asked for one

    def targets():
        active = requests.get(f"http://127.0.0.1:{stack_config.prometheus_port}/api/v1/targets",
                              timeout=10).json()["data"]["activeTargets"]
        return {(t["labels"]["job"], t["labels"]["instance"]): t["health"] for t in active}

    wanted = {"app": len(stack_config.app_names), "persister": len(stack_config.persister_names),
              "racer": 1, "expirer": 1, "redis": 1, "redis-gate": 1, "mysqld": 1, "nginx": 1, "prometheus": 1,
              "alertmanager": 1}

    def counted(seen):
        return {job: sum(1 for j, _ in seen if j == job) for job in wanted}

    def all_up():
        # Counted job by job: Prometheus reads a new list of targets a moment after
        # the instances change, and the stack scrapes more jobs than these (the edge).
        seen = targets()
        return seen if set(seen.values()) == {"up"} and counted(seen) == wanted else None

    seen = eventually(all_up) or targets()
    assert counted(seen) == wanted
    assert set(seen.values()) == {"up"}, seen


def test_no_series_names_a_sale_and_the_exporter_walks_no_keyspace(stack_apps, stack_config):
    """The gate's streams are summed by the apps' collector (flashsale_gate_backlog):
    the Redis exporter is asked for none, which would be a series per sale, found by
    a SCAN of the keyspace at every scrape."""
    client = stack_apps(strategy="atomic", instances=2, workers=2)
    sku = f"prom-stream-{uuid.uuid4().hex[:6]}"
    client.reset(sku, stock=5, strategy="gate")
    assert client.order(sku, 1, "u1").status_code == 201
    assert eventually(lambda: query(stack_config, "flashsale_gate_backlog"))
    for port in (stack_config.redis_port, stack_config.redis_gate_port):
        # The exporter's own connections: the suite's other pytest SCANs its own
        # databases on these servers, so the server's count of SCANs is not the exporter's.
        asked = exporter_commands(port, seconds=5)  # two scrapes of every job
        assert asked, f"no scrape of the Redis on {port} seen"
        assert not [command for command in asked if command.upper().startswith("SCAN")]
    assert not query(stack_config, '{stream!=""}')
    assert not query(stack_config, '{__name__=~"redis_stream_.*"}')
    assert query(stack_config, 'up{job="redis-gate"}')[0]["value"][1] == "1"


def exporter_commands(port: int, *, seconds: float) -> list[str]:
    """What the Redis exporter asked of the Redis on ``port`` over ``seconds``, read by
    MONITOR: the commands of each connection that named itself ``redis_exporter``
    (the exporter connects afresh at each scrape). MONITOR leaves out admin commands
    (CONFIG, SLOWLOG), none of which walks the keyspace."""
    mark = f"flashsale-test-{uuid.uuid4().hex}"
    seen = []
    # RESP2: redis-py reads MONITOR's lines as replies of that protocol.
    with redis.Redis(port=port, protocol=2, socket_timeout=30).monitor() as monitor:
        time.sleep(seconds)
        redis.Redis(port=port).echo(mark)  # the end of the window, in MONITOR's order
        while mark not in (line := monitor.next_command())["command"]:
            seen.append(line)
    exporter = {line["client_port"] for line in seen if line["command"] == "CLIENT SETNAME redis_exporter"}
    return [line["command"] for line in seen if line["client_port"] in exporter]


def test_every_recording_rule_and_dashboard_query_has_data_after_a_short_sale(stack_apps, stack_config):
    client = stack_apps(strategy="atomic", instances=2, workers=2)
    tag = uuid.uuid4().hex[:6]
    for strategy in ("gate", "setnx", "atomic"):
        client.reset(f"prom-{strategy}-{tag}", stock=60, strategy=strategy)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: client.order(f"prom-{('gate', 'setnx', 'atomic')[i % 3]}-{tag}", 1, f"u{i}"),
                      range(240)))  # 80 a product: each sells out
    # A sale with a waiting room: places taken, one admitted, and what it bought.
    room = f"prom-room-{tag}"
    client.reset(room, stock=5, strategy="atomic", room_rate=1000, room_active=1)
    for user in ("r0", "r1", "r0"):
        place = client.room(room, user).json()
    assert place["state"] == "admitted", place
    assert client.order(room, 1, "r0", admission=place["admission"]).status_code == 201
    records = [rule["record"] for group in yaml.safe_load(RULES.read_text())["groups"]
               for rule in group["rules"] if "record" in rule]
    assert len(records) >= 10
    records += [query.expr for panel in PANELS for query in panel.queries]  # what /dashboard asks

    def empty():
        return [record for record in records if not query(stack_config, record)]

    assert eventually(lambda: not empty(), seconds=30), f"no data for {empty()}"


def test_the_gate_backlog_rises_while_the_persisters_are_paused_and_falls_to_0(stack_apps, stack_config):
    client = stack_apps(strategy="atomic", instances=2, workers=2)
    sku = f"prom-backlog-{uuid.uuid4().hex[:6]}"
    client.reset(sku, stock=50, strategy="gate")
    sup = Supervisor(stack_config)
    with sup.paused(stack_config.persister_names):
        for i in range(30):
            assert client.order(sku, 1, f"u{i}").status_code == 201
        # Read by the apps from Redis at each scrape: seen with the persisters down.
        assert eventually(lambda: _backlog(stack_config) == 30, seconds=15)
    assert eventually(lambda: _backlog(stack_config) == 0, seconds=30)
    assert client.audit(sku, settle=0)["gate"]["persisted"] == 30


def _backlog(config) -> float | None:
    result = query(config, "flashsale:gate_backlog")
    return float(result[0]["value"][1]) if result else None


def test_the_persisters_metrics_count_what_they_wrote(stack_apps, stack_config):
    client = stack_apps(strategy="atomic", instances=2, workers=2)
    sku = f"prom-written-{uuid.uuid4().hex[:6]}"
    before = _written(stack_config)
    client.reset(sku, stock=20, strategy="gate")
    for i in range(20):
        assert client.order(sku, 1, f"u{i}").status_code == 201
    assert client.audit(sku, settle=30)["gate"]["persisted"] == 20
    assert eventually(lambda: _written(stack_config) - before == 20, seconds=10)


def _written(config) -> float:
    ports = [config.persister_metrics_port(name) for name in config.persister_names]
    written = ("flashsale_gate_intents_total", frozenset({("outcome", "written")}))
    return scraped(config, ports).get(written, 0.0)


def test_nothing_of_prometheus_or_the_exporters_listens_beyond_loopback(stack_config):
    ports = [stack_config.prometheus_port, *stack_config.exporter_ports.values(),
             stack_config.nginx_status_port, stack_config.racer_metrics_port,
             stack_config.alertmanager_port, stack_config.pager_port,
             *(stack_config.persister_metrics_port(name) for name in stack_config.persister_names)]
    listening = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True).stdout
    for port in ports:
        local = [line.split()[3] for line in listening.splitlines() if line.split()[3].endswith(f":{port}")]
        assert local and all(address.startswith("127.0.0.1:") for address in local), (port, local)


def test_nginx_status_is_on_its_own_port_only(stack_config):
    assert requests.get(f"{stack_config.base_url}/stub_status", timeout=10).status_code == 404
    status = requests.get(f"http://127.0.0.1:{stack_config.nginx_status_port}/stub_status", timeout=10)
    assert status.status_code == 200 and "Active connections" in status.text



def _api_requests(stack_config) -> float:
    """Queries Prometheus' HTTP API has answered (instant and range), from its own
    /metrics: what the dashboard's data costs it, rule evaluations aside."""
    text = requests.get(f"http://127.0.0.1:{stack_config.prometheus_port}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("prometheus_http_requests_total{")
               and ('handler="/api/v1/query"' in line or 'handler="/api/v1/query_range"' in line))


def test_a_visitor_sends_prometheus_no_query_of_their_own(stack_apps):
    client = stack_apps()
    for path in ("/prometheus/api/v1/query?query=up", "/prometheus/api/v1/query_range?query=up&step=1",
                 "/prometheus/api/v1/series?match[]=up", "/prometheus/graph"):
        response = requests.get(f"{client.base_url}{path}", timeout=10)
        assert response.status_code == 404 and response.json()["error"] == "not_found", path
    for path, status in (("/dashboard/data/up", 404), ("/dashboard/data/orders?window=7", 400),
                         ("/dashboard/data/orders?window=x", 400), ("/dashboard/data/orders?query=up", 200)):
        response = requests.get(f"{client.base_url}{path}", timeout=10)
        assert response.status_code == status and response.headers["Content-Type"] == "application/json", path
    assert response.json()["lines"] is not None and "query" not in response.text


def test_two_hundred_tabs_asking_at_once_cost_prometheus_one_answer_a_step(stack_apps, stack_config):
    """The apps keep each panel's answer for its step in the shared cache: asked 200
    times in about a second over both instances (directly: nginx's own rate limit for
    the route is another test), Prometheus answers the panel's queries once per step."""
    stack_apps()
    panel = next(p for p in PANELS if len(p.queries) > 1)
    urls = [f"http://127.0.0.1:{stack_config.app_port_of(name)}/dashboard/data/{panel.key}?window=300"
            for name in stack_config.app_names]
    before = _api_requests(stack_config)

    def ask(n: int) -> dict:
        time.sleep(n * 0.005)  # 200 over one second
        response = requests.get(urls[n % len(urls)], headers={"Host": "localhost"}, timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    started = time.time()
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(ask, range(200)))
    took = time.time() - started
    asked = _api_requests(stack_config) - before
    steps = {answer["end"] for answer in answers}
    step = answers[0]["step"]
    # The answers came within ``took`` seconds, however fast this machine is: they
    # can name no more steps than that span touches (each answer's step ends at most
    # one step after the moment it was asked).
    assert len(steps) <= math.floor(took / step) + 2, (steps, took)
    # And Prometheus was asked once a step for each of the panel's queries, not once
    # a tab: the cache is what is tested.
    assert 0 < asked <= len(panel.queries) * len(steps), (asked, steps)


def test_past_its_rate_an_address_is_refused_the_dashboards_data_by_nginx(stack_apps):
    client = stack_apps()
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: requests.get(f"{client.base_url}/dashboard/data/stock",
                                                        timeout=10).status_code, range(80)))
    assert 200 in statuses and 429 in statuses, statuses
