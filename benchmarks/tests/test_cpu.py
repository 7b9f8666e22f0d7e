"""The CPU meter reads the real stack's processes: what the apps spend answering
shows under ``apps``, what a child process spends under ``wrk``."""

import subprocess
import sys

import requests

from benchmarks.cpu import ROLES, CpuMeter, children_cpu, paired
from stack.supervisor import Supervisor


def test_answers_the_apps_give_show_as_their_cpu_and_every_server_has_a_role(stack_config):
    meter = CpuMeter(Supervisor(stack_config))
    before = meter.snapshot()
    assert set(before) <= set(ROLES)
    assert {"apps", "persisters", "redis", "mariadb", "nginx"} <= set(before)
    with requests.Session() as session:
        for _ in range(300):
            session.get(stack_config.base_url + "/api/ping", timeout=10).raise_for_status()
    spent = meter.snapshot() - before
    # 300 answers through Django cost far more than a millisecond of the workers'
    # CPU; nginx passed each of them on.
    assert spent["apps"] > 0.001 and spent["nginx"] > 0


def test_a_finished_child_process_cpu_is_counted():
    before = children_cpu()
    subprocess.run([sys.executable, "-c", "t = __import__('time').process_time()\n"
                    "while __import__('time').process_time() - t < 0.2: pass"], check=True)
    assert children_cpu() - before >= 0.15



def test_a_pair_of_rows_is_each_rows_median_and_each_runs_ratio():
    runs = [{"a": 100.0, "b": 110.0}, {"a": 200.0, "b": 220.0}, {"a": 100.0, "b": 150.0}]
    [pair] = paired(runs, [("a", "b")])
    assert (pair.row, pair.without, pair.with_it) == ("a", 100.0, 150.0)
    assert pair.each == "1.10, 1.10, 1.50"
