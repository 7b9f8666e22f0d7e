"""The instances' /metrics on the running stack: every purchase through nginx is
counted once, whichever of two instances and four workers answered it, and still is
after a worker is replaced; every lock taken is counted and timed once; nginx does not
pass /metrics on."""

import os
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from flashsale.serve import SERVERS
from stack.supervisor import Supervisor

pytestmark = pytest.mark.e2e


def scraped(config, ports: list[int] | None = None) -> dict[tuple[str, frozenset], float]:
    """(sample name, its labels) → value, summed over the /metrics of the processes on
    ``ports`` (default: every app instance)."""
    summed: dict[tuple[str, frozenset], float] = {}
    for port in ports or [config.app_port_of(name) for name in config.app_names]:
        for key, value in scraped_from(f"http://127.0.0.1:{port}/metrics").items():
            summed[key] = summed.get(key, 0) + value
    return summed


def scraped_from(url: str) -> dict[tuple[str, frozenset], float]:
    """(sample name, its labels) → value, from one exporter's page."""
    text = requests.get(url, timeout=10).text
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def purchases_counted(config) -> dict[tuple[str, str], float]:
    """(strategy, code) → count, summed over every instance's /metrics."""
    counted = {}
    for (name, labels), value in scraped(config).items():
        if name == "flashsale_purchases_total":
            labels = dict(labels)
            assert set(labels) == {"strategy", "code"}  # never a sku, user or key
            counted[(labels["strategy"], labels["code"])] = value
    return counted


def grown(before: dict, after: dict) -> dict:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def test_every_purchase_is_counted_once_across_instances_and_workers(stack_apps, stack_config):
    client = stack_apps(strategy="atomic", instances=2, workers=2)
    client.reset("metrics-1", stock=30)
    before = purchases_counted(stack_config)
    keys = [f"m-{uuid.uuid4().hex}" for _ in range(40)]
    answers = [client.order("metrics-1", 1, f"u{i}", key=key).status_code for i, key in enumerate(keys)]
    answers.append(client.order("metrics-1", 1, "u0", key=keys[0]).status_code)  # a replay
    assert sorted(set(answers)) == [200, 201, 409]
    assert grown(before, purchases_counted(stack_config)) == {
        ("atomic", "created"): 30, ("atomic", "sold_out"): 10, ("atomic", "replayed"): 1}


@pytest.mark.parametrize("server", SERVERS)
def test_a_replaced_worker_keeps_its_counts_in_the_sum(stack_apps, stack_config, server):
    client = stack_apps(strategy="atomic", instances=2, workers=2, server=server)
    client.reset("metrics-2", stock=100)
    before = purchases_counted(stack_config)
    for i in range(20):
        assert client.order("metrics-2", 1, f"u{i}").status_code == 201
    counted = purchases_counted(stack_config)
    assert grown(before, counted) == {("atomic", "created"): 20}

    master = psutil.Process(Supervisor(stack_config).info(stack_config.app_names[0])["pid"])
    workers = master.children()
    os.kill(workers[0].pid, signal.SIGKILL)  # the server starts another in its place
    deadline = time.monotonic() + 30
    while {w.pid for w in master.children()} & {workers[0].pid} or len(master.children()) < len(workers):
        assert time.monotonic() < deadline, f"{server} did not replace the worker"
        time.sleep(0.2)
    assert purchases_counted(stack_config) == counted  # the dead worker's counts stay

    for i in range(20, 30):
        assert client.order("metrics-2", 1, f"u{i}").status_code == 201
    assert grown(before, purchases_counted(stack_config)) == {("atomic", "created"): 30}


def test_nginx_does_not_pass_metrics_on(stack_apps, stack_config):
    stack_apps()
    response = requests.get(f"{stack_config.base_url}/metrics", timeout=10)
    assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert "flashsale_purchases" not in response.text


def test_every_lock_taken_is_counted_and_timed_once_across_workers(stack_apps, stack_config):
    """Under a lock strategy, with buyers at once on two instances × two workers: the
    waits and the holds each number the acquisitions, and the purchases' timings
    number the purchases, once every worker's timings thread has written them."""
    client = stack_apps(strategy="atomic", instances=2, workers=2)
    client.reset("metrics-3", stock=25, strategy="setnx")
    before = scraped(stack_config)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: client.order("metrics-3", 1, f"u{i}").status_code, range(40)))
    assert answers.count(201) == 25

    def lock(name, **labels):
        return sum(v - before.get(k, 0) for k, v in after.items()
                   if k[0] == name and {("backend", "setnx"), *labels.items()} <= k[1])

    deadline = time.monotonic() + 10
    while True:
        after = scraped(stack_config)
        acquired = lock("flashsale_lock_acquisitions_total", outcome="acquired")
        timings = (lock("flashsale_lock_wait_seconds_count"), lock("flashsale_lock_hold_seconds_count"),
                   sum(v - before.get(k, 0) for k, v in after.items()
                       if k[0] == "flashsale_purchase_seconds_count" and ("strategy", "setnx") in k[1]))
        if timings == (acquired, acquired, len(answers)) or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # a worker that answered no scrape writes its timings within a second
    assert 25 <= acquired <= 40
    assert timings == (acquired, acquired, len(answers))
    assert lock("flashsale_lock_acquisitions_total", outcome="timed_out") == answers.count(503)


@pytest.mark.parametrize("server", SERVERS)
def test_each_instance_says_what_its_server_uses_and_serves_now(stack_apps, stack_config, server):
    """multiprocess mode drops process_*: the instance's own collector reads its
    server's master and workers from /proc; the requests in flight include the scrape."""
    stack_apps(strategy="atomic", instances=2, workers=2, server=server)
    port = stack_config.app_port_of(stack_config.app_names[0])
    master = psutil.Process(Supervisor(stack_config).info(stack_config.app_names[0])["pid"])
    first = scraped(stack_config, [port])
    read = {name: value for (name, _), value in first.items()}
    assert read["flashsale_instance_processes"] == 1 + len(master.children(recursive=False))
    assert read["flashsale_instance_processes"] >= 3  # the master and the two workers
    assert read["flashsale_instance_resident_memory_bytes"] > 50_000_000
    assert read["flashsale_requests_in_flight"] >= 1  # the scrape itself
    for _ in range(50):
        requests.get(f"http://127.0.0.1:{port}/api/ping", timeout=10)
    later = {name: value for (name, _), value in scraped(stack_config, [port]).items()}
    assert later["flashsale_instance_cpu_seconds_total"] > read["flashsale_instance_cpu_seconds_total"]
