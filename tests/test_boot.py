"""The entry points start Django with the collector paused (flashsale.boot), and leave
it running: a long-lived process (an app worker, a persister) that kept it paused
would keep every reference cycle it ever made."""

import os
import subprocess
import sys

import pytest

from stack.config import ROOT

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
