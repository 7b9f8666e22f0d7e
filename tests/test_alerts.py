"""The alerts fire on what they watch and stay quiet otherwise, at the stack's 2 s
scrape and a cluster's 15 s and 30 s (promtool's unit tests). Where they go:
Alertmanager's configs (the stack's rendered one and the compose file's) pass
``amtool check-config``; the pager keeps and logs what Alertmanager sends and refuses
anything else; and on the stack, a persister stopped during a sale pages through
Prometheus and Alertmanager, then resolves once it is back."""

import json
import subprocess
import time
import uuid

import pytest
import requests
import yaml

from pager.server import Pager, serve
from stack.config import ROOT
from stack.control import reconfigure
from stack.servers import render
from stack.supervisor import Supervisor

from .test_prometheus import eventually


def amtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["amtool", *args], capture_output=True, text=True, timeout=60)


# promtool's unit tests of the alerts, one file a scrape interval: the stack's 2 s, and
# a cluster's 15 s and 30 s (Prometheus evaluating as often as it scrapes); the
# cluster's own alerts (rules-kubernetes.yml) at all three too.
ALERT_TESTS = {("rules.yml", "2s"): "rules.test.yml",
               ("rules.yml", "15s"): "rules.test.15s.yml",
               ("rules.yml", "30s"): "rules.test.30s.yml",
               ("rules-kubernetes.yml", "2s"): "rules-kubernetes.test.2s.yml",
               ("rules-kubernetes.yml", "15s"): "rules-kubernetes.test.15s.yml",
               ("rules-kubernetes.yml", "30s"): "rules-kubernetes.test.30s.yml"}
# Fires always, by design: the pipeline's heartbeat.
ALWAYS = {"FlashsaleWatchdog"}


@pytest.mark.parametrize(("rules", "interval"), ALERT_TESTS)
def test_every_alert_has_unit_tests_that_see_it_fire_and_stay_quiet_at_each_interval(rules, interval):
    groups = yaml.safe_load((ROOT / "monitoring" / rules).read_text())["groups"]
    alerts = {rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule}
    file = yaml.safe_load((ROOT / "monitoring" / ALERT_TESTS[rules, interval]).read_text())
    assert file["rule_files"] == [rules] and file["evaluation_interval"] == interval
    assert {test["interval"] for test in file["tests"]} == {interval}
    cases = [case for test in file["tests"] for case in test.get("alert_rule_test", [])]
    fired = {case["alertname"] for case in cases if case["exp_alerts"]}
    quiet = {case["alertname"] for case in cases if not case["exp_alerts"]}
    assert len(alerts) > 5 and alerts == fired == quiet | (ALWAYS & alerts), (alerts ^ fired, alerts ^ quiet)


@pytest.mark.system
@pytest.mark.parametrize(("rules", "interval"), ALERT_TESTS)
def test_the_alerts_fire_on_what_they_watch_at_each_scrape_interval(rules, interval):
    checked = subprocess.run(["promtool", "check", "rules", rules], cwd=ROOT / "monitoring",
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # A bound for a run that hangs, not for a slow one: the 2 s file's hours of samples
    # took over a minute beside make test-slow's burners (seconds on a quiet machine).
    tested = subprocess.run(["promtool", "test", "rules", ALERT_TESTS[rules, interval]],
                            cwd=ROOT / "monitoring", capture_output=True, text=True, timeout=240)
    assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.mark.system
def test_the_compose_files_alertmanager_config_checks():
    checked = amtool("check-config", str(ROOT / "monitoring/alertmanager-compose.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr


# Where an alert goes, by its labels: a page to the pages' receiver, a warning to the
# warnings', the watchdog to the heartbeat's.
ROUTES = [({"alertname": "FlashsaleTargetDown", "severity": "page", "job": "persister"}, "pages"),
          ({"alertname": "FlashsaleOversold", "severity": "page", "strategy": "setnx"}, "pages"),
          ({"alertname": "FlashsaleBusy", "severity": "warn", "strategy": "setnx"}, "warnings"),
          ({"alertname": "FlashsaleGateWriteLag", "severity": "warn"}, "warnings"),
          ({"alertname": "FlashsaleWatchdog", "severity": "none"}, "heartbeat")]


@pytest.mark.system
@pytest.mark.parametrize("config", ["stack", "compose"])
def test_pages_warnings_and_the_heartbeat_go_to_receivers_of_their_own(config, tmp_path):
    if config == "stack":
        path = render(ROOT / "stack/templates/alertmanager.yml", tmp_path / "alertmanager.yml",
                      pager_port=9388)
    else:
        path = ROOT / "monitoring/alertmanager-compose.yml"
    for labels, receiver in ROUTES:
        routed = amtool("config", "routes", "test", f"--config.file={path}",
                        *(f"{name}={value}" for name, value in labels.items()))
        assert routed.returncode == 0 and routed.stdout.strip() == receiver, (labels, routed.stdout)
    route = yaml.safe_load(path.read_text())["route"]
    assert route["group_by"] == ["alertname", "job"]  # one notification a job, not a pod


@pytest.mark.e2e
@pytest.mark.usefixtures("stack_watchers")
def test_the_stacks_alertmanager_config_checks_and_prometheus_sends_to_it(stack_config):
    checked = amtool("check-config", str(stack_config.run_dir / "alertmanager" / "alertmanager.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    alertmanagers = f"http://127.0.0.1:{stack_config.prometheus_port}/api/v1/alertmanagers"

    def found() -> list[str]:
        # Prometheus finds its Alertmanager a few seconds after it starts.
        active = requests.get(alertmanagers, timeout=10).json()["data"]["activeAlertmanagers"]
        return [a["url"] for a in active]

    assert eventually(found, seconds=30) == [f"http://127.0.0.1:{stack_config.alertmanager_port}/api/v2/alerts"]


def _notification(status: str, **labels) -> dict:
    """A notification as Alertmanager's webhook_config sends it (version 4)."""
    return {"version": "4", "status": status, "receiver": "pager", "groupKey": "{}:{}", "truncatedAlerts": 0,
            "groupLabels": {"alertname": labels.get("alertname", "X")}, "commonLabels": labels,
            "commonAnnotations": {}, "externalURL": "http://alertmanager",
            "alerts": [{"status": status, "labels": labels, "annotations": {"summary": "it broke"},
                        "startsAt": "2026-11-28T09:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
                        "generatorURL": "http://prometheus", "fingerprint": "abc"}]}


@pytest.fixture
def pager(tmp_path):
    log = tmp_path / "alerts.jsonl"
    server = serve(Pager(log=log), host="127.0.0.1", port=0)
    yield f"http://127.0.0.1:{server.server_address[1]}", log
    server.shutdown()


def test_the_pager_logs_each_alert_and_lists_the_notifications_newest_first(pager):
    url, log = pager
    for status in ("firing", "resolved"):
        sent = requests.post(f"{url}/alerts", json=_notification(status, alertname="FlashsaleTargetDown",
                                                                 job="persister"), timeout=5)
        assert sent.status_code == 200 and sent.json() == {"alerts": 1}
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    logged = [(line["status"], line["alertname"], line["labels"]["job"], line["summary"]) for line in lines]
    assert logged == [
        ("firing", "FlashsaleTargetDown", "persister", "it broke"),
        ("resolved", "FlashsaleTargetDown", "persister", "it broke")]
    assert [n["status"] for n in requests.get(f"{url}/alerts", timeout=5).json()] == ["resolved", "firing"]
    firing = requests.get(f"{url}/alerts", params={"status": "firing"}, timeout=5).json()
    assert [n["status"] for n in firing] == ["firing"]


@pytest.mark.parametrize("body", [
    b"", b"not json", b"[]", b'{"version": "3", "alerts": []}', b'{"version": "4", "alerts": "many"}',
    b'{"version": "4", "alerts": [1]}',
])
def test_the_pager_refuses_what_is_not_a_notification_with_a_json_400(pager, body):
    url, log = pager
    answer = requests.post(f"{url}/alerts", data=body, headers={"Content-Type": "application/json"},
                           timeout=5)
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_input"
    assert not log.exists() and requests.get(f"{url}/alerts", timeout=5).json() == []


def test_the_pager_answers_other_paths_and_statuses_with_json_errors(pager):
    url, _ = pager
    assert requests.get(f"{url}/alerts", params={"status": "odd"}, timeout=5).status_code == 400
    assert requests.get(f"{url}/nowhere", timeout=5).json()["error"] == "not_found"
    assert requests.post(f"{url}/nowhere", data=b"{}", timeout=5).status_code == 404


@pytest.mark.e2e
@pytest.mark.usefixtures("stack_watchers")
def test_a_persister_stopped_during_a_sale_pages_and_resolves_when_it_is_back(stack_apps, stack_config):
    client = stack_apps(strategy="atomic", instances=2, workers=2)
    pager = f"http://127.0.0.1:{stack_config.pager_port}/alerts"
    stopped = stack_config.persister_names[0]

    def paged(status: str, since: float) -> bool:
        # One alert for the job, however many of its targets are down.
        return any(n["received_at"] >= since and any(
                       a["labels"].get("alertname") == "FlashsaleTargetDown"
                       and a["labels"].get("job") == "persister" and "instance" not in a["labels"]
                       for a in n["alerts"])
                   for n in requests.get(pager, params={"status": status}, timeout=5).json())

    sku = f"alert-{uuid.uuid4().hex[:6]}"
    client.reset(sku, stock=40, strategy="gate")
    since = time.time()
    with Supervisor(stack_config).paused([stopped]):
        for i in range(20):  # the sale goes on: the other persister writes
            assert client.order(sku, 1, f"u{i}").status_code == 201
        # Down for the rule's 10 s, then Alertmanager's group_wait: well within a minute.
        assert eventually(lambda: paged("firing", since), seconds=60, every=1)
    back = time.time()
    assert eventually(lambda: paged("resolved", back), seconds=60, every=1)
    assert client.audit(sku, settle=30)["gate"]["persisted"] == 20


@pytest.mark.e2e
@pytest.mark.usefixtures("stack_watchers")
def test_on_the_stack_a_page_holds_back_the_warning_of_its_cause_and_the_heartbeat_beats(stack_config):
    alertmanager = f"http://127.0.0.1:{stack_config.alertmanager_port}/api/v2/alerts"
    run = uuid.uuid4().hex[:8]
    ends = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60))
    sent = [{"labels": {"alertname": name, "severity": severity, "run": run, **extra}, "endsAt": ends}
            for name, severity, extra in [("FlashsaleErrorBudgetBurning", "page", {}),
                                          ("FlashsaleServerErrors", "warn", {}),
                                          ("FlashsaleBusy", "warn", {"strategy": "setnx"})]]
    assert requests.post(alertmanager, json=sent, timeout=10).status_code == 200

    def states() -> dict[str, str]:
        held = requests.get(alertmanager, params={"filter": f'run="{run}"'}, timeout=10).json()
        return {a["labels"]["alertname"]: a["status"]["state"] for a in held}

    # The 5xx warning is the budget's page's cause: held back while it fires; the busy
    # warning is another cause's, and goes out.
    assert eventually(lambda: states() == {"FlashsaleErrorBudgetBurning": "active",
                                           "FlashsaleServerErrors": "suppressed",
                                           "FlashsaleBusy": "active"}, seconds=20), states()
    pager = f"http://127.0.0.1:{stack_config.pager_port}/alerts"

    def reached() -> set[tuple[str, str]]:
        return {(n["receiver"], a["labels"]["alertname"])
                for n in requests.get(pager, timeout=5).json() for a in n["alerts"]
                if a["labels"].get("run") == run or a["labels"]["alertname"] == "FlashsaleWatchdog"}

    expected = {("pages", "FlashsaleErrorBudgetBurning"), ("warnings", "FlashsaleBusy")}
    assert eventually(lambda: reached() >= expected, seconds=30), reached()
    assert ("warnings", "FlashsaleServerErrors") not in reached()
    # The watchdog fires from the rules' first evaluation; Prometheus sends a firing
    # alert again every minute (its resend delay), Alertmanager on a fresh stack
    # perhaps only then.
    assert eventually(lambda: ("heartbeat", "FlashsaleWatchdog") in reached(), seconds=90), reached()


@pytest.mark.e2e
@pytest.mark.usefixtures("stack_watchers")
def test_with_every_app_stopped_the_edge_counts_the_failed_purchases(stack_apps, stack_config):
    """The apps' figures say nothing of a purchase that never reached one; the edge's
    (mtail on nginx's access log) count each answer nginx gave, its 5xx as failed."""
    client = stack_apps()
    query = f"http://127.0.0.1:{stack_config.prometheus_port}/api/v1/query"

    def edge(codes: str) -> float:
        result = requests.get(query, timeout=5, params={
            "query": f'sum(flashsale_edge_purchases_total{{code=~"{codes}"}}) or vector(0)'}).json()
        return float(result["data"]["result"][0]["value"][1])

    sku = f"edge-{uuid.uuid4().hex[:6]}"
    client.reset(sku, stock=20)
    buyers = ["before", "after", *(f"away-{i}" for i in range(10))]
    for buyer in buyers:
        client.as_buyer(buyer)  # signed up while the apps answer
    sold, failed = edge("201"), edge("5..")
    assert client.order(sku, 1, "before").status_code == 201
    # At least: a test before this one may still be finishing its requests.
    assert eventually(lambda: edge("201") >= sold + 1, seconds=30, every=0.5)
    supervisor = Supervisor(stack_config)
    try:
        for name in stack_config.app_names:
            supervisor.stop(name)
        answers = [client.order(sku, 1, f"away-{i}") for i in range(10)]
        assert all(500 <= answer.status_code < 600 for answer in answers), [a.status_code for a in answers]
        assert eventually(lambda: edge("5..") >= failed + 10, seconds=30, every=0.5)
    finally:
        reconfigure(stack_config)  # starts the instances again and waits until they answer
    sold = edge("201")
    assert client.order(sku, 1, "after").status_code == 201
    assert eventually(lambda: edge("201") >= sold + 1, seconds=30, every=0.5)
