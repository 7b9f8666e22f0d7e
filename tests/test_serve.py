"""The app instances' server (``flashsale.serve``): gunicorn or granian, one set of
knobs, started for real on a free port. Neither needs a backend to answer /livez."""

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests
from gunicorn.errors import HaltServer

from flashsale import gunicorn as hooks
from flashsale.serve import SERVERS, ServeError, command, server_name
from stack.scratch import free_port

pytestmark = pytest.mark.server  # it starts servers of its own

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_each_server_gets_the_same_knobs():
    gunicorn = command("gunicorn", bind="127.0.0.1:8001", workers=3, threads=4, bin_dir=BIN, name="app1")
    assert gunicorn[:2] == [str(BIN / "gunicorn"), "flashsale.wsgi:application"]
    assert {"--bind=127.0.0.1:8001", "--workers=3", "--threads=4", "--worker-class=gthread",
            "--name=app1", "--preload"} <= set(gunicorn)
    granian = command("granian", bind="0.0.0.0:8000", workers=3, threads=4, bin_dir=BIN)
    assert granian[0] == str(BIN / "granian") and "flashsale.wsgi:application" in granian
    assert {"--interface=wsgi", "--host=0.0.0.0", "--port=8000", "--workers=3", "--blocking-threads=4",
            "--respawn-failed-workers"} <= set(granian)


def test_a_stopping_worker_finishes_its_requests_for_the_grace_given():
    assert "--graceful-timeout=5" in command("gunicorn", bind="127.0.0.1:1", workers=1, threads=1,
                                             bin_dir=BIN)
    assert "--graceful-timeout=10" in command("gunicorn", bind="127.0.0.1:1", workers=1, threads=1,
                                              bin_dir=BIN, grace=10)
    assert "--workers-kill-timeout=10" in command("granian", bind="127.0.0.1:1", workers=1, threads=1,
                                                  bin_dir=BIN, grace=10)


@pytest.mark.parametrize("bind", ["8001", ":8001", "127.0.0.1:", "127.0.0.1:http"])
def test_a_bind_without_host_and_port_is_refused(bind):
    with pytest.raises(ServeError):
        command("gunicorn", bind=bind, workers=1, threads=1, bin_dir=BIN)


def test_the_server_is_gunicorn_unless_told_and_nothing_unknown():
    assert server_name({}) == "gunicorn" and server_name({"FLASHSALE_SERVER": ""}) == "gunicorn"
    assert server_name({"FLASHSALE_SERVER": "granian"}) == "granian"
    with pytest.raises(ServeError, match="uwsgi"):
        server_name({"FLASHSALE_SERVER": "uwsgi"})


@pytest.mark.parametrize("server", SERVERS)
def test_the_launcher_becomes_the_server_on_an_empty_metrics_directory(server, tmp_path):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    (metrics / "counter_999999.db").write_bytes(b"an earlier run's")
    port = free_port()
    env = {**os.environ, "FLASHSALE_SERVER": server, "PROMETHEUS_MULTIPROC_DIR": str(metrics),
           "DJANGO_SETTINGS_MODULE": "flashsale.settings.base"}
    process = subprocess.Popen([sys.executable, "-m", "flashsale.serve", f"--bind=127.0.0.1:{port}",
                                "--workers=2", "--threads=2"], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:  # a worker's first request loads Django: slow on a busy machine
                if requests.get(f"http://127.0.0.1:{port}/livez", timeout=10).status_code == 200:
                    break
            except (requests.ConnectionError, requests.Timeout):
                pass
            assert process.poll() is None and time.monotonic() < deadline, process.stdout.read().decode()
            time.sleep(0.1)
        assert not (metrics / "counter_999999.db").exists()
        master = psutil.Process(process.pid)  # the launcher's PID: exec'd, not a parent
        assert server in " ".join(master.cmdline())
        # One worker answered; the master may still be starting the other on a busy
        # machine (gunicorn forks them one after another).
        while len(workers := master.children(recursive=True)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(workers) >= 2
        process.send_signal(signal.SIGTERM)
        assert process.wait(15) == 0
        gone, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive, alive  # a stop by its PID leaves no worker behind
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _halts(halted: BaseException) -> None:
    try:
        raise halted
    except (StopIteration, HaltServer):  # as gunicorn's main loop catches them, then halts
        hooks.on_exit(None)


@pytest.mark.parametrize(("halted", "status"),
                         [(StopIteration(), 0), (HaltServer("Worker failed to boot.", 3), 3)],
                         ids=["stopped", "a-worker-failed-to-boot"])
def test_gunicorn_s_master_leaves_with_the_status_it_halts_with(halted, status):
    """The master leaves by os._exit (``flashsale.gunicorn.on_exit``) with the status
    gunicorn would have left with: 0 once stopped, a worker's boot failure's code."""
    child = multiprocessing.get_context("fork").Process(target=_halts, args=(halted,))
    child.start()
    child.join(30)
    assert child.exitcode == status
