"""Databases on the stack's MariaDB as ``manage.py migrate`` leaves one, for the test
hosts' app instances (``stack.hosted``), which each want a database of their own.

A ``migrate`` starts Django and runs every migration: seconds of CPU, most of it the
start. So this process migrates one database, its template, once, and each database
after is a copy of it: ``mariadb-dump`` of the template (its tables, rows, stored
procedures and triggers) loaded by ``mariadb``, two C programs and the server's work.
The template is dropped when the process leaves; one it left behind (killed) is a
``test_`` database like any other a test left.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys

from .config import ROOT, StackConfig
from .servers import (
    APP_DATABASE,
    app_database_url,
    mariadb_app_client,
    mariadb_app_connection,
)

# By MariaDB port: this process's template there (the lanes' stacks differ by port).
_templates: dict[int, str] = {}


class MigrateError(RuntimeError):
    """``migrate`` or the copy of its template failed; the message carries its output."""


def migrated_database(config: StackConfig, database: str) -> None:
    """``database`` made anew on ``config``'s MariaDB, migrated."""
    template = _template(config)
    _made_anew(config, database)
    dumper, env = mariadb_app_client(config, "mariadb-dump")
    dump = subprocess.Popen([*dumper, "--routines", "--triggers", "--single-transaction", "--skip-comments",
                             template], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    # --comments: the client strips them from what it sends (the procedures' bodies) otherwise.
    loader, _ = mariadb_app_client(config, "mariadb")
    load = subprocess.run([*loader, "--comments", database], stdin=dump.stdout,
                          capture_output=True, text=True, env=env, check=False)
    assert dump.stdout is not None and dump.stderr is not None
    dump.stdout.close()
    dumped = dump.stderr.read().decode(errors="replace")
    if dump.wait() or load.returncode:
        raise MigrateError(f"copying {template} into {database} failed:\n{dumped}{load.stderr}")


def _template(config: StackConfig) -> str:
    """This process's template on ``config``'s MariaDB, migrated now if it is not
    there (the first call, or a test dropped it)."""
    name = _templates.get(config.mysql_port)
    if name is not None:
        with mariadb_app_connection(config, database=None) as db:
            cursor = db.cursor()
            if cursor.execute("SHOW DATABASES LIKE %s", [name.replace("_", "\\_")]):
                return name
    name = f"test_{APP_DATABASE}_template_{os.getpid()}"
    _made_anew(config, name)
    env = {**os.environ, **config.app_environment("migrate"), "DATABASE_URL": app_database_url(config, name)}
    done = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise MigrateError(f"migrating {name} failed:\n{done.stdout}{done.stderr}")
    if config.mysql_port not in _templates:
        atexit.register(dropped, config, name)
    _templates[config.mysql_port] = name
    return name


def _made_anew(config: StackConfig, database: str) -> None:
    with mariadb_app_connection(config, database=None) as db:
        cursor = db.cursor()
        cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
        cursor.execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4")


def dropped(config: StackConfig, database: str) -> None:
    """``database`` gone; a stack that is down already leaves only its space."""
    try:
        with mariadb_app_connection(config, database=None) as db:
            db.cursor().execute(f"DROP DATABASE IF EXISTS `{database}`")
    except Exception as e:  # noqa: BLE001 - the stack may be down; a leftover is only space
        print(f"[migrated] {database} not dropped: {e}", file=sys.stderr)
