"""Every program the project runs is installed by the step ``make test`` runs.

The programs are read from the code, not listed by hand: the first word of every
command list handed to a call that runs one (``subprocess.run``, ``Popen``, a test
host's ``call``, a server's ``command=``), every name passed to ``shutil.which`` or
``stack.servers.binary``, and every absolute path to a program. Each must be on this
machine, and come either from the virtualenv (``requirements-dev.txt``) or from a
Debian package that ``scripts/install-system-packages.sh --test`` installs, directly
or as what it depends on (or from the base system every Debian has). A program that
only a ``bench-*`` target installs (wrk, once) fails here on every machine, a fresh one
or one where a benchmark ran before.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from stack.servers import SBIN_PATH

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
SKIP_DIRS = {".venv", ".git", "node_modules", "migrations", "site", "reports", ".run"}
# Calls that run their first argument (a command list), or look up a program by name.
RUNNERS = {"run", "Popen", "check_output", "check_call", "call", "start", "_run"}
LOOKUPS = {"which", "binary"}


def _python_files():
    for path in ROOT.rglob("*.py"):
        if not SKIP_DIRS.intersection(path.relative_to(ROOT).parts):
            yield path


def _call_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return node.func.id if isinstance(node.func, ast.Name) else None


def _first_word(node: ast.AST) -> str | None:
    if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        first = node.elts[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None


@cache
def invoked() -> dict[str, list[str]]:
    """Each program the code runs, with where (``file:line``)."""
    found: dict[str, list[str]] = {}
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str | None] = []
            if isinstance(node, ast.Call):
                name = _call_name(node)
                commands = [k.value for k in node.keywords if k.arg == "command"]
                if name in RUNNERS and node.args:
                    commands.append(node.args[0])
                names += [_first_word(c) for c in commands]
                if name in LOOKUPS and node.args and isinstance(node.args[0], ast.Constant):
                    names.append(node.args[0].value)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if re.fullmatch(r"/(usr/)?s?bin/[\w.+-]+", node.value):
                    names.append(node.value)
            for program in filter(None, names):
                found.setdefault(program, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


@cache
def packages_of_make_test() -> frozenset[str]:
    """What the install step of ``make test`` installs: its list and all they depend on."""
    listed = subprocess.run([str(ROOT / "scripts" / "install-system-packages.sh"), "--test", "--list"],
                            capture_output=True, text=True, check=True).stdout.split()
    closure = subprocess.run(
        ["apt-cache", "depends", "--recurse", "--installed", "--no-recommends", "--no-suggests",
         "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *listed],
        capture_output=True, text=True, check=True).stdout
    # Package names start a line; a dependency line names one too ("  Depends: libc6").
    names = {line.split(":")[-1].strip().strip("<>").split(":")[0] for line in closure.splitlines()}
    return frozenset(names) | frozenset(listed)


def _owner(program: Path) -> str | None:
    """The Debian package that installed ``program`` (through its symlinks, as
    update-alternatives makes them), or None."""
    for candidate in (program, program.resolve()):
        # usrmerge: a file dpkg knows as /bin/x may be found as /usr/bin/x, and back.
        for path in {str(candidate), re.sub(r"^/usr/", "/", str(candidate))}:
            answer = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True)
            # "dash: /bin/sh" (beside "diversion by dash from: /bin/sh" lines)
            owners = [line.split(":")[0].split(",")[0] for line in answer.stdout.splitlines()
                      if not line.startswith("diversion by ")]
            if owners:
                return owners[0].strip()
    return None


def _base_system(package: str) -> bool:
    """Essential or required: on every Debian, installed with the system itself."""
    answer = subprocess.run(["dpkg-query", "-W", "-f=${Essential} ${Priority}", package],
                            capture_output=True, text=True)
    return answer.returncode == 0 and bool({"yes", "required"} & set(answer.stdout.split()))


def test_the_code_is_read_for_the_programs_it_runs():
    # Known programs from each way of running one: a sign the reading still finds them.
    programs = invoked()
    for expected in ("wrk", "mariadbd", "redis-server", "nginx", "prometheus", "promtool", "tc", "nft",
                     "docker-compose", "/usr/bin/chromium"):
        assert expected in programs, f"the code no longer shows running {expected}: is the reading broken?"


def _not_installed_by_make_test(program: str) -> str | None:
    """Why ``program`` is not installed by ``make test``, or None when it is."""
    where = ", ".join(invoked()[program][:3])
    found = Path(program) if program.startswith("/") else shutil.which(program, path=SBIN_PATH)
    if not found or not os.access(found, os.X_OK):
        return (f"{program} (run at {where}) is not installed: add its package to "
                "scripts/install-system-packages.sh --test")
    found = Path(found)
    if found.is_relative_to(VENV_BIN):
        return None  # from requirements-dev.txt, which make test installs
    package = _owner(found)
    if package is None:
        return f"{found} (run at {where}) belongs to no Debian package: who installs it?"
    if package in packages_of_make_test() or _base_system(package):
        return None
    return (f"{program} (run at {where}) comes from Debian's {package}, which make test does not install "
            "(only a bench target, or somebody by hand): add it to scripts/install-system-packages.sh --test")


# One test for all the programs, not one each: a parameter list is read as the tests are
# collected, and reading the code for it cost every pytest process seconds.
@pytest.mark.system
def test_every_program_the_code_runs_is_installed_by_make_test():
    problems = list(filter(None, map(_not_installed_by_make_test, sorted(invoked()))))
    assert not problems, "\n".join(problems)


def test_the_libraries_the_clock_preloads_are_installed_by_make_test():
    # stack/clock.py names each library's package as it looks for it.
    source = (ROOT / "stack" / "clock.py").read_text()
    packages = re.findall(r'_library\("[^"]+", "([\w.+-]+)"\)', source)
    assert packages, "stack/clock.py no longer names its libraries' packages"
    for package in packages:
        assert package in packages_of_make_test() or _base_system(package), package
