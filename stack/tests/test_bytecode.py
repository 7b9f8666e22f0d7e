"""``make test`` and ``make check`` keep the bytecode of what they run, whatever the
environment says (``stack.check.keep_bytecode``), and ``make test`` compiles it once
before its parts start (``stack.check.warm_bytecode``)."""

import subprocess
import sys

import pytest

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
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as some CI images say: overruled
    monkeypatch.delenv("DJANGO_SETTINGS_MODULE", raising=False)  # a project of two modules, no Django
    (tmp_path / "probe.py").write_text("X = 1\n")
    (tmp_path / "test_probe.py").write_text("import probe\n\n\ndef test_x():\n    assert probe.X == 1\n")
    warm_bytecode(cwd=tmp_path)
    tag = sys.implementation.cache_tag
    # What the test imports, and the test with its asserts rewritten.
    assert sorted(path.name for path in tmp_path.glob("__pycache__/*.pyc")) == [
        f"probe.{tag}.pyc", f"test_probe.{tag}-pytest-{pytest.__version__}.pyc"]
