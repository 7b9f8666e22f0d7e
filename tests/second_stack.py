"""A second local stack for the tests that start, break and stop one: its own run
directory and ports, so the stack the rest of the suite uses is left alone. Its ports
are that stack's plus 100 (``make test``'s lanes are 200 apart: stack.suite), so that
each lane's second stack is apart from the others'."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from stack.config import ROOT, StackConfig


def ports() -> dict[str, str]:
    shared = StackConfig.from_env().port_environment()
    return {name: str(int(port) + 100) for name, port in shared.items() if name != "RUN_DIR"}


PORTS = ports()


def environment(run_dir: Path, **env: str) -> dict[str, str]:
    return {**ports(), "RUN_DIR": str(run_dir), "INSTANCES": "1", **env}


def stack(run_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``python -m stack <args>`` for the second stack."""
    return subprocess.run(
        [sys.executable, "-m", "stack", *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, **environment(run_dir, **env)},
    )


def config_for(run_dir: Path, **env: str) -> StackConfig:
    saved = dict(os.environ)
    os.environ.update(environment(run_dir, **env))
    try:
        return StackConfig.from_env()
    finally:
        os.environ.clear()
        os.environ.update(saved)
