"""``make test`` and ``make check`` keep the bytecode of what they run, whatever the
environment says (``stack.check.keep_bytecode``)."""

import subprocess
import sys

from stack.check import keep_bytecode


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
