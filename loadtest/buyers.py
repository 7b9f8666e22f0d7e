"""A load run's buyers, made as accounts with ``manage.py buyers_make``, each with its
bearer token: for apps that take the buyer from credentials (``FLASHSALE_BUYER_AUTH``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
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


# The stack's own database's buyers this process made: (its run directory, MariaDB's
# port, the prefix, their tokens' hours) -> (buyer -> token, in order; when made,
# time.monotonic()).
_made: dict[tuple[str, int, str, float], tuple[dict[str, str], float]] = {}


def buyer_tokens(config: StackConfig, *, prefix: str, count: int, database: str = APP_DATABASE,
                 hours: float = 1.0) -> dict[str, str]:
    """``buyers_file``'s buyers as buyer -> token, in order. In the stack's own
    database, the buyers this process made before serve again while their tokens have
    more than half of ``hours`` left: the accounts stay, and a token is signed, not
    stored, so none made since revokes it (each run of ``buyers_make`` is a Django
    start, and a run of sales, the chaos tests', asked for the same buyers each sale).
    A test host's database is made anew for each: its buyers are made each time."""
    key = (str(config.run_dir), config.mysql_port, prefix, hours)
    if database == APP_DATABASE and key in _made:
        tokens, made = _made[key]
        if len(tokens) >= count and time.monotonic() - made < hours * 3600 / 2:
            return dict(list(tokens.items())[:count])
    with tempfile.TemporaryDirectory(prefix="flashsale-buyers-") as scratch:
        out = buyers_file(config, Path(scratch) / "buyers.tsv", prefix=prefix, count=count,
                          database=database, hours=hours)
        tokens = dict(line.split("\t", 1) for line in out.read_text().splitlines())
    if database == APP_DATABASE:
        _made[key] = tokens, time.monotonic()
    return tokens
