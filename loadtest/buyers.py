"""A load run's buyers, made as accounts with ``manage.py buyers_make``, each with its
bearer token: for apps that take the buyer from credentials (``FLASHSALE_BUYER_AUTH``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from stack.config import ROOT, StackConfig
from stack.servers import APP_DATABASE, app_database_url


def buyers_file(config: StackConfig, out: Path, *, prefix: str, count: int, database: str = APP_DATABASE,
                hours: float = 1.0) -> Path:
    """``count`` buyers named ``<prefix><n>``, made in ``database`` on the stack's
    MariaDB, and their tokens written to ``out`` (name, a tab, token: a line each,
    as wrk's purchase script and the locustfile read them)."""
    env = {**os.environ, **config.app_environment("buyers"),
           "DATABASE_URL": app_database_url(config, database)}
    done = subprocess.run([sys.executable, "manage.py", "buyers_make", str(count), "--out", str(out),
                           "--prefix", prefix, "--hours", str(hours)],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"manage.py buyers_make failed:\n{done.stdout}{done.stderr}")
    return out


def buyer_tokens(config: StackConfig, *, prefix: str, count: int, database: str = APP_DATABASE,
                 hours: float = 1.0) -> dict[str, str]:
    """``buyers_file``'s buyers as buyer -> token, in order."""
    with tempfile.TemporaryDirectory(prefix="flashsale-buyers-") as scratch:
        out = buyers_file(config, Path(scratch) / "buyers.tsv", prefix=prefix, count=count,
                          database=database, hours=hours)
        return dict(line.split("\t", 1) for line in out.read_text().splitlines())
