"""``python`` for the tests that start a Python process of an environment of its own
to see what the settings make of it (refuse to start, read a URL, pass a check):
the process is forked from a server that has imported Django's framework
(multiprocessing's forkserver), not started anew. Each such start imported them
again, most of its CPU, and those tests ran hundreds.

The child is given the environment, the working directory and the command line
before it runs anything of the project: the settings, the apps and whatever reads
the environment are imported in it, as in a new process. What the server imports
must therefore read neither the environment nor the settings as it is imported
(``PRELOADED``; prometheus_client does, so it is not among them). One thing of a new
process's start is not redone: Python's locale coercion (PEP 538), which gives a
process started without ``LANG`` or ``LC_ALL`` an ``LC_CTYPE`` of its own.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import runpy
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

# Not stack.config's: the child imports this module, and nothing of the project before it runs.
ROOT = Path(__file__).resolve().parents[1]
# Not DRF: it reads the settings as it is imported.
PRELOADED = ["django.core.management", "django.db.models", "django.forms", "django.http", "django.urls",
             "kazoo.client", "redis", "requests"]

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOADED)
# A forkserver child's status is read once from its sentinel, and Process.start reads
# the status of every other child that has ended: a start in one thread beside a join
# in another can both read it, and the one that finds it gone calls it 255.
_reading_statuses = threading.Lock()


def python(args: Sequence[str], *, env: Mapping[str, str], cwd: Path = ROOT,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """As ``subprocess.run([sys.executable, *args], env=env, cwd=cwd,
    capture_output=True, text=True, timeout=timeout)``, for ``args`` of the forms
    ``-c CODE ...``, ``-m MODULE ...`` and ``SCRIPT ...``."""
    with tempfile.TemporaryDirectory() as private:
        out, err = Path(private, "stdout"), Path(private, "stderr")
        child = _context.Process(target=_run, args=(list(args), dict(env), str(cwd), str(out), str(err)))
        with _reading_statuses:
            child.start()
        ended = multiprocessing.connection.wait([child.sentinel], timeout)
        with _reading_statuses:
            if not ended:
                child.kill()
            child.join()
        if not ended:
            raise subprocess.TimeoutExpired([sys.executable, *args], timeout)
        assert child.exitcode is not None  # joined
        return subprocess.CompletedProcess([sys.executable, *args], child.exitcode,
                                           _read(out), _read(err))


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _run(args: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """In the child: become ``python *args`` in ``env`` and ``cwd``, and leave with
    the status Python would."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for fd, path in ((1, out), (2, err)):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    status = 0
    try:
        if args[0] == "-c":
            sys.argv = ["-c", *args[2:]]
            sys.path.insert(0, "")
            exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102 (python -c)
        elif args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            sys.path.insert(0, cwd)
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(args)
            sys.path.insert(0, str(Path(cwd, args[0]).resolve().parent))
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as e:
        status = _exit_status(e.code)
    except BaseException:  # noqa: BLE001 (as Python's own top level: the traceback, then 1)
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
