"""The entry points start Django with the collector paused (flashsale.boot), and leave
it running: a long-lived process (an app worker, a persister) that kept it paused
would keep every reference cycle it ever made."""

import json
import os
import subprocess
import sys

import pytest

from stack.config import ROOT

from .forked import python

REPORT = "import gc; print(gc.isenabled(), gc.get_freeze_count() > 0)"


@pytest.mark.parametrize("arguments", [
    ["-c", f"import flashsale.wsgi; {REPORT}"],
    ["manage.py", "shell", "--no-imports", "-c", REPORT],
], ids=["wsgi", "manage.py"])
def test_an_entry_point_freezes_what_django_made_and_resumes_the_collector(arguments):
    done = subprocess.run([sys.executable, *arguments], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]


def test_manage_py_with_settings_that_do_not_load_still_says_so_as_django_does():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "flashsale.settings.absent"}
    done = subprocess.run([sys.executable, "manage.py", "help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert "settings are not properly configured" in done.stdout + done.stderr
    assert "No module named 'flashsale.settings.absent'" in done.stdout + done.stderr


# A worker's first requests, served in the process that imported the entry point (as a
# gunicorn worker forked from its master): what they import of the project and of the
# frameworks its views and locks are written in, the worker would import for itself.
FIRST_REQUESTS = """
import io, json, sys
import flashsale.wsgi
before = set(sys.modules)
for path in ("/healthz", "/metrics", "/api/products/absent", "/api/docs"):
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80",
               "HTTP_HOST": "127.0.0.1", "REMOTE_ADDR": "127.0.0.1", "wsgi.url_scheme": "http",
               "wsgi.input": io.BytesIO(), "wsgi.errors": sys.stderr}
    b"".join(flashsale.wsgi.application(environ, lambda status, headers, exc_info=None: None))
roots = {"flashsale", "buyers", "common", "dashboard", "inventory", "locking", "orders", "payments", "races",
         "waitingroom", "rest_framework", "drf_spectacular", "kazoo", "stripe"}
print(json.dumps(sorted(name for name in set(sys.modules) - before if name.split(".")[0] in roots)))
"""


def test_the_app_entry_point_imports_what_a_workers_first_requests_would():
    """``flashsale.boot.preload``: the URLconf and its views, the lock backends, the
    caches' clients, imported in the master that forks the workers."""
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    done = python(["-c", FIRST_REQUESTS], env={**env, "FLASHSALE_STRATEGY": "zookeeper"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []
