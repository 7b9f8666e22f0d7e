"""A load run's buyers, made as accounts with ``manage.py buyers_make``, each with its
bearer token: for apps that take the buyer from credentials (``FLASHSALE_BUYER_AUTH``)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
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
    tokens = _made_now(config, prefix=prefix, count=count, database=database, hours=hours)
    if database == APP_DATABASE:
        _made[key] = tokens, time.monotonic()
    return tokens


def _made_now(config: StackConfig, *, prefix: str, count: int, database: str = APP_DATABASE,
              hours: float = 1.0) -> dict[str, str]:
    with tempfile.TemporaryDirectory(prefix="flashsale-buyers-") as scratch:
        out = buyers_file(config, Path(scratch) / "buyers.tsv", prefix=prefix, count=count,
                          database=database, hours=hours)
        return dict(line.split("\t", 1) for line in out.read_text().splitlines())


# Buyers made ahead for MadeBuyers, by stack (its run directory, MariaDB's port): the
# tokens no object has taken yet, and when they were made (time.monotonic()).
_ahead: dict[tuple[str, int], tuple[deque[str], float]] = {}
_ahead_mutex = threading.Lock()
MADE_AHEAD = 500  # buyers a batch: one Django start makes hundreds for about the CPU of one
MADE_HOURS = 1.0


class MadeBuyers(Mapping[str, str]):
    """Bearer tokens by buyer label, each label a buyer of its own that no other label
    or object is given: accounts made ahead in the stack's database by ``buyers_make``,
    a batch at a time, as the load tests' are. The stack's own tests buy with them
    where a test needs distinct buyers, not their sign-up: ``SignedUpBuyers``' sign-up
    over the API costs each buyer a request (the sign-up has tests of its own). A
    batch serves while its tokens have more than half of their hours left."""

    def __init__(self, config: StackConfig):
        self.config = config
        self._tokens: dict[str, str] = {}

    def __getitem__(self, label: str) -> str:
        with _ahead_mutex:
            if label not in self._tokens:
                self._tokens[label] = _taken(self.config)
            return self._tokens[label]

    def signed_up(self, labels: list[str]) -> None:
        """``labels``' buyers taken now (a batch made if need be), as ``SignedUpBuyers``
        signs them up before a burst."""
        for label in labels:
            self[label]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._tokens))

    def __len__(self) -> int:
        return len(self._tokens)


def _taken(config: StackConfig) -> str:
    """A token of a buyer made ahead for ``config``'s stack that nobody has taken (under
    ``_ahead_mutex``)."""
    key = (str(config.run_dir), config.mysql_port)
    tokens, made = _ahead.get(key, (deque(), 0.0))
    if not tokens or time.monotonic() - made > MADE_HOURS * 3600 / 2:
        # A prefix no batch had: buyers_make gives a name made before a new token.
        batch = _made_now(config, prefix=f"made-{secrets.token_hex(4)}-", count=MADE_AHEAD, hours=MADE_HOURS)
        tokens, made = deque(batch.values()), time.monotonic()
        _ahead[key] = tokens, made
    return tokens.popleft()
