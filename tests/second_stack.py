"""A second local stack for the tests that start, break and stop one: its own run
directory and ports, so the stack the rest of the suite uses is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from stack.config import ROOT, StackConfig

PORTS = {"MYSQL_PORT": "3410", "REDIS_PORT": "6490", "ZK_PORT": "2290",
         "NGINX_PORT": "8180", "APP_PORT": "8101", "METRICS_PORT": "9490", "PAYPROVIDER_PORT": "8170"}


def environment(run_dir: Path, **env: str) -> dict[str, str]:
    return {**PORTS, "RUN_DIR": str(run_dir), "INSTANCES": "1", **env}


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
