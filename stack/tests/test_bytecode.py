"""``make test`` and ``make check`` keep the bytecode of what they run, whatever the
environment says (``stack.check.keep_bytecode``), and ``make test`` compiles it once
before its parts start (``stack.check.warm_bytecode``)."""

import subprocess
import sys
from pathlib import Path

import django

from stack.check import keep_bytecode, warm_bytecode


def test_a_run_keeps_the_bytecode_an_environment_that_says_write_none_would_lose(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    (tmp_path / "probe.py").write_text("X = 1\n")

    def written_by_a_process_started_now() -> list[str]:
        subprocess.run([sys.executable, "-c", "import probe"], cwd=tmp_path, check=True)
        return sorted(path.name for path in tmp_path.glob("__pycache__/probe.*.pyc"))

    assert written_by_a_process_started_now() == []  # as the environment asks
    keep_bytecode()
    assert written_by_a_process_started_now() == [f"probe.{sys.implementation.cache_tag}.pyc"]
    assert sys.dont_write_bytecode is False  # this process's own imports too


def test_the_warm_up_compiles_the_tests_it_collects_and_what_they_import(tmp_path, monkeypatch):
    # Its bytecode goes under a directory of the test's: the tree's own is there already.
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as some CI images say: overruled
    warm_bytecode("stack/tests/test_bytecode.py")

    def compiled(module: Path) -> list[str]:
        """The bytecode written of ``module`` under the prefix, by name."""
        under = tmp_path / module.parent.relative_to("/")
        return sorted(path.name for path in under.glob(f"{module.stem}.*.pyc"))

    tag = sys.implementation.cache_tag
    assert [name for name in compiled(Path(__file__)) if "-pytest-" in name]  # its asserts rewritten
    assert compiled(Path(django.__file__)) == [f"__init__.{tag}.pyc"]  # and what it imported
