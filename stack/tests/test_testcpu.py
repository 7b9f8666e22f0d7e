"""Each test's CPU (stack/testcpu.py) counts what its pytest and the processes it
started used, those that ended included, and nothing of the tests before it."""

import json
import os
import subprocess
import sys
import textwrap
import threading

import psutil

from stack.config import ROOT
from stack.supervisor import descendants
from stack.testcpu import tree_seconds

# A child that uses this much CPU by its own clock, whatever the machine's speed.
BURN = "import time\nwhile time.process_time() < {seconds}: pass\n"


def test_a_tree_counts_its_children_running_and_ended():
    def own() -> float:  # this process's alone
        times = os.times()
        return times.user + times.system

    before, own_before = tree_seconds(os.getpid()), own()
    subprocess.run([sys.executable, "-c", BURN.format(seconds=0.3)], check=True)  # ended, waited for
    burn_then_sleep = BURN.format(seconds=0.3) + "print('burnt', flush=True)\ntime.sleep(60)"
    running = subprocess.Popen([sys.executable, "-c", burn_then_sleep], stdout=subprocess.PIPE, text=True)
    try:
        assert running.stdout is not None and running.stdout.readline() == "burnt\n"
        children = tree_seconds(os.getpid()) - before - (own() - own_before)
        assert children >= 0.6 - 0.04  # both children's, to the clock tick each
    finally:
        running.kill()
        running.wait()


SLEEPER = "import time; time.sleep(60)"


def test_the_descendants_are_those_psutil_finds_started_by_any_thread_at_any_depth():
    # A child whose child sleeps, and one started from another thread than this one.
    nested = f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {SLEEPER!r}])\n" \
             "print('started', flush=True)\ntime.sleep(60)"
    started: list[subprocess.Popen] = []
    try:
        started.append(subprocess.Popen([sys.executable, "-c", nested], stdout=subprocess.PIPE, text=True))
        sleeper = [sys.executable, "-c", SLEEPER]
        thread = threading.Thread(target=lambda: started.append(subprocess.Popen(sleeper)))
        thread.start()
        thread.join()
        assert started[0].stdout is not None and started[0].stdout.readline() == "started\n"
        found = {process.pid for process in descendants(os.getpid())}
        assert found == {process.pid for process in psutil.Process().children(recursive=True)}
        assert {process.pid for process in started} < found and len(found) >= 3
    finally:
        # Only what this test started and what that started: the process's other children
        # (tests.forked's server, multiprocessing's resource tracker) belong to other tests.
        ours = [psutil.Process(process.pid) for process in started]
        everyone = ours + [child for process in ours for child in process.children(recursive=True)]
        for process in everyone:
            process.kill()
        psutil.wait_procs(everyone, timeout=10)
        for process in started:
            process.wait()
    assert descendants(2**22 + 1) == []  # past pid_max: no such process


def test_make_tests_pytest_writes_each_tests_cpu_where_it_is_told(tmp_path):
    (tmp_path / "test_burns.py").write_text(textwrap.dedent(f"""
        import subprocess, sys
        def test_idle():
            pass
        def test_burns_in_a_child():
            subprocess.run([sys.executable, "-c", {BURN.format(seconds=0.5)!r}], check=True)
    """))
    out = tmp_path / "cpu.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "FLASHSALE_TEST_CPU_STACK")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "stack.testcpu", "--rootdir", str(tmp_path), "-c", os.devnull,
                           str(tmp_path)],
                          cwd=ROOT, env={**env, "FLASHSALE_TEST_CPU_OUT": str(out)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    cpu = {test.split("::")[-1]: seconds for test, seconds in json.loads(out.read_text()).items()}
    assert cpu["test_burns_in_a_child"][0] >= 0.5 - 0.02  # to the clock tick
    assert cpu["test_idle"][0] < 0.5
    assert cpu["test_idle"][1] == cpu["test_burns_in_a_child"][1] == 0.0  # no stack asked for
