"""A database copied from this process's migrated template is what ``migrate`` leaves:
the same tables, rows, stored procedures and triggers, and nothing left to migrate;
a template a test dropped is migrated again."""

import os
import subprocess
import sys
import uuid

import pytest

from stack import migrated
from stack.config import ROOT, StackConfig
from stack.servers import app_database_url, mariadb_app_client

pytestmark = pytest.mark.server  # the stack's MariaDB, databases of its own


def described(config: StackConfig, database: str) -> str:
    """Everything of ``database`` but its name, as mariadb-dump writes it."""
    client, env = mariadb_app_client(config, "mariadb-dump")
    options = ["--routines", "--triggers", "--skip-comments", "--skip-dump-date"]
    done = subprocess.run([*client, *options, database], capture_output=True, text=True, check=True, env=env)
    return done.stdout.replace(database, "<database>")


def test_a_copy_is_what_migrate_left_and_a_dropped_template_is_migrated_again():
    config = StackConfig.from_env()
    copy = f"test_flashsale_copy_{uuid.uuid4().hex[:8]}"
    try:
        migrated.migrated_database(config, copy)
        template = migrated._templates[config.mysql_port]
        said = described(config, copy)
        assert "CREATE TABLE `orders_order`" in said and "PROCEDURE `flashsale_purchase`" in said
        assert "INSERT INTO `django_migrations`" in said
        assert said == described(config, template)
        env = {**os.environ, **config.app_environment("migrate"),
               "DATABASE_URL": app_database_url(config, copy)}
        check = subprocess.run([sys.executable, "manage.py", "migrate", "--check"], cwd=ROOT, env=env,
                               capture_output=True, text=True, check=False)
        assert check.returncode == 0, check.stdout + check.stderr  # nothing left to apply

        migrated.dropped(config, template)
        migrated.migrated_database(config, copy)
        assert migrated._templates[config.mysql_port] == template
        assert described(config, copy) == described(config, template)  # migrated anew: its own times
    finally:
        migrated.dropped(config, copy)
