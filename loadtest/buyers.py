"""A load run's buyers, made as accounts with ``manage.py buyers_make``, each with its
bearer token: for apps that take the buyer from credentials (``FLASHSALE_BUYER_AUTH``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from stack.config import ROOT, StackConfig


def buyer_tokens(config: StackConfig, *, prefix: str, count: int, database_url: str | None = None,
                 hours: float = 1.0) -> dict[str, str]:
    """``count`` buyers named ``<prefix><n>``, made in the stack's database (or
    ``database_url``'s), and their tokens: buyer -> token, in order."""
    env = {**os.environ, **config.app_environment("buyers"),
           **({"DATABASE_URL": database_url} if database_url else {})}
    with tempfile.TemporaryDirectory(prefix="flashsale-buyers-") as scratch:
        out = Path(scratch) / "buyers.tsv"
        done = subprocess.run([sys.executable, "manage.py", "buyers_make", str(count), "--out", str(out),
                               "--prefix", prefix, "--hours", str(hours)],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"manage.py buyers_make failed:\n{done.stdout}{done.stderr}")
        return dict(line.split("\t", 1) for line in out.read_text().splitlines())
