"""``tests.forked.python`` answers as a new ``python`` process of the same command line
and environment would: the same status, output and errors, nothing of the project
imported before the child runs, and nothing of the parent's environment kept."""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from stack.config import ROOT

from .forked import python

# LANG given: a new process without it would add LC_CTYPE (PEP 538), which a forked child does not.
BASE = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "DJANGO_SETTINGS_MODULE": "flashsale.settings.base"}
COMMANDS = [
    ["-c", "import sys; print(sys.argv[1:]); raise SystemExit(3)", "a", "b"],
    ["-c", "raise SystemExit('said, then 1')"],
    ["-c", "import json, os; print(json.dumps(sorted(os.environ)))"],
    ["-m", "json.tool", "--compact", "pyproject.toml"],  # not JSON: the module's own error, status 1
    ["manage.py", "check", "--tag", "nonesuch"],
    ["manage.py", "shell", "--no-imports", "-c", "from django.conf import settings; print(settings.DEBUG)"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: " ".join(args[:2])[:40])
def test_a_forked_child_answers_as_a_new_process_would(args):
    new = subprocess.run([sys.executable, *args], cwd=ROOT, env=BASE, capture_output=True, text=True,
                         timeout=120)
    forked = python(args, env=BASE)
    assert (forked.returncode, forked.stdout, forked.stderr) == (new.returncode, new.stdout, new.stderr)


def test_an_uncaught_exception_prints_its_traceback_and_leaves_with_1():
    forked = python(["-c", "1 / 0"], env=BASE)
    assert forked.returncode == 1
    assert forked.stderr.startswith("Traceback (most recent call last):")
    assert forked.stderr.rstrip().endswith("ZeroDivisionError: division by zero")


def test_the_settings_and_the_project_are_imported_in_the_child_alone():
    """What reads the environment as it is imported (the settings, the project,
    prometheus_client) comes from the child's environment, not the server's."""
    probe = ("import sys; print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('flashsale', 'stack', 'orders', 'common', 'rest_framework', 'prometheus_client')))")
    assert python(["-c", probe], env=BASE).stdout.strip() == "[]"
    read = ("import django; django.setup(); from django.conf import settings; "
            "print(settings.FLASHSALE_STRATEGY)")
    for strategy in ("setnx", "gate"):
        said = python(["-c", read], env={**BASE, "FLASHSALE_STRATEGY": strategy})
        assert said.stdout.strip() == strategy, said.stderr[-1500:]


def test_a_child_that_outlasts_its_timeout_is_killed():
    with pytest.raises(subprocess.TimeoutExpired):
        python(["-c", "import time; time.sleep(60)"], env=BASE, timeout=1)


def test_children_started_from_many_threads_at_once_each_answer_their_own_status():
    """A start in one thread reads the status of every ended child, beside the join of
    another thread that reads its own: unguarded, one of them found it gone and called it
    255, with nothing said (and a test that read the last line of errors failed)."""
    def status(n: int) -> int:
        return python(["-c", f"raise SystemExit({n % 3})"], env=BASE).returncode

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(status, range(200))) == [n % 3 for n in range(200)]
