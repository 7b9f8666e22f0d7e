"""The database's users, one a role (deploy/k8s/base/migrate.yaml's ``db-users`` step),
on a real MariaDB: the step's own script, run on a scratch server that writes a binary
log as the cluster's does, gives each role what its work needs and no more. The schema's
owner migrates; the processes' user buys through the purchase's procedure and writes
rows, and can change no table and grant nothing; the backup's user dumps with the
nightly options and writes nothing."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import MySQLdb
import pytest

from stack.config import ROOT
from stack.drill import DUMP_OPTIONS, ScratchMariaDB, scratch_mariadb
from stack.scratch import free_port

from .test_k8s import K8S, _stand_in, of_kind, render
from .test_prometheus import eventually

# Each user's password as the manifests' tests give its key: a process of a rendered
# container's environment signs in with it.
PASSWORDS = {user: _stand_in(key) for user, key in (
    ("flashsale", "MARIADB_PASSWORD"), ("flashsale_app", "MARIADB_APP_PASSWORD"),
    ("flashsale_backup", "MARIADB_BACKUP_PASSWORD"), ("flashsale_exporter", "MARIADB_EXPORTER_PASSWORD"))}
REFUSED = (1044, 1142, 1227, 1370)  # access denied: to a database, a table, a privilege, a routine


def _users_step() -> dict:
    job = next(doc for name, doc in of_kind(render(K8S / "overlays" / "production"), "Job").items()
               if name.startswith("flashsale-migrate"))
    (step,) = job["spec"]["template"]["spec"]["initContainers"]
    return step


def _refused(connection, statement: str) -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute(statement)
    except (MySQLdb.OperationalError, MySQLdb.ProgrammingError) as e:
        return e.args[0] in REFUSED
    return False


@contextlib.contextmanager
def scratch_database() -> Iterator[tuple[ScratchMariaDB, int]]:
    """A scratch MariaDB on a free port, as the cluster's is once the migration Job has
    run: the database, its users made by the Job's own step (each with the password the
    manifests' tests give its key, ``tests.test_k8s._stand_in``), the schema migrated by
    its owner. Yields the server and its port."""
    step = _users_step()
    assert step["name"] == "db-users" and step["command"][:2] == ["bash", "-c"]
    port = free_port()
    with scratch_mariadb(f"--port={port}", "--bind-address=127.0.0.1", "--log-bin=mariadb-bin",
                         "--server-id=1") as server:
        with server.connect() as root, root.cursor() as cursor:  # what the image does at its first start
            cursor.execute("CREATE DATABASE flashsale CHARACTER SET utf8mb4")
            cursor.execute(f"CREATE USER 'flashsale'@'%' IDENTIFIED BY '{PASSWORDS['flashsale']}'")
            cursor.execute("GRANT ALL ON flashsale.* TO 'flashsale'@'%'")
        script = step["command"][-1].replace("--host=mariadb", f"--socket={server.socket}")
        for _ in range(2):  # every release runs it again
            done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, env={
                **os.environ, "MYSQL_PWD": "", "MARIADB_APP_PASSWORD": PASSWORDS["flashsale_app"],
                "MARIADB_BACKUP_PASSWORD": PASSWORDS["flashsale_backup"],
                "MARIADB_EXPORTER_PASSWORD": PASSWORDS["flashsale_exporter"]})
            assert done.returncode == 0, done.stderr
        # The owner migrates: tables, indexes, the purchase's procedures.
        migrated = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT,
                                  capture_output=True, text=True, timeout=300,
                                  env={**os.environ, "DATABASE_URL": _url("flashsale", port),
                                       "DJANGO_SETTINGS_MODULE": "flashsale.settings.base"})
        assert migrated.returncode == 0, migrated.stdout[-2000:] + migrated.stderr[-3000:]
        yield server, port


def _url(user: str, port: int) -> str:
    return f"mysql://{user}:{PASSWORDS[user]}@127.0.0.1:{port}/flashsale"


@pytest.mark.server  # it starts a MariaDB of its own
def test_each_role_does_its_work_and_nothing_more(tmp_path):
    with scratch_database() as (server, port):
        def connect(user: str):
            return MySQLdb.connect(host="127.0.0.1", port=port, user=user, password=PASSWORDS[user],
                                   database="flashsale", autocommit=True)

        with connect("flashsale_app") as app, app.cursor() as cursor:
            cursor.execute("INSERT INTO inventory_product (sku, name, strategy, payment_window_s, sale) "
                           "VALUES ('roles-1', 'roles', 'atomic', 0, 1)")
            product = cursor.lastrowid
            cursor.execute("INSERT INTO inventory_stock (product_id, segment, quantity, initial_quantity, "
                           "version, fence_source, fence, sale) VALUES (%s, 0, 5, 5, 0, '', 0, 1)", [product])
            # The purchase as the apps make it: one call of the owner's procedure (no
            # per-buyer limit here: 0).
            cursor.execute("CALL flashsale_purchase(%s, 0, 1, 'ann', 'k-roles', 'app1', 'atomic', 0, 0, "
                           "5000000, FALSE, 0, '', 1)", [product])
            reply = cursor.fetchone()
            while cursor.nextset():
                pass
            cursor.execute("SELECT quantity FROM inventory_stock WHERE product_id = %s", [product])
            assert cursor.fetchone() == (4,), reply
            cursor.execute("SELECT COUNT(*) FROM orders_order WHERE idempotency_key = 'k-roles'")
            assert cursor.fetchone() == (1,)
            cursor.execute("UPDATE orders_order SET status = 'paid' WHERE idempotency_key = 'k-roles'")
            cursor.execute("DELETE FROM inventory_stockflow WHERE product_id = %s", [product])
            for statement in ("CREATE TABLE flashsale.more (id INT)", "DROP TABLE orders_order",
                              "ALTER TABLE orders_order ADD COLUMN more INT", "TRUNCATE inventory_stockflow",
                              "CREATE PROCEDURE p() SELECT 1", "SELECT * FROM mysql.user",
                              "GRANT SELECT ON flashsale.* TO 'flashsale_backup'@'%'"):
                assert _refused(app, statement), statement

        # The backup dumps as the nightly Job does (the binary log's position too).
        dumped = subprocess.run(["mariadb-dump", "--host=127.0.0.1", f"--port={port}",
                                 "--user=flashsale_backup", *DUMP_OPTIONS, "--master-data=2", "flashsale"],
                                capture_output=True, text=True, timeout=120,
                                env={**os.environ, "MYSQL_PWD": PASSWORDS["flashsale_backup"]})
        assert dumped.returncode == 0, dumped.stderr
        assert "CHANGE MASTER TO" in dumped.stdout and "PROCEDURE `flashsale_purchase`" in dumped.stdout
        assert "k-roles" in dumped.stdout
        with connect("flashsale_backup") as backup:
            assert _refused(backup, "DELETE FROM orders_order")
            assert _refused(backup, "CALL flashsale_purchase(1, 0, 1, 'x', 'x', 'x', 'x', 0, 0, 1, FALSE, 0, "
                                    "'', 1)")

        # The backup's user follows the binary log as the cluster's mariadb-binlog does
        # (its own script): what was written is there, and a write made now arrives
        # within seconds, not at the next night's dump.
        follower = _binlog_follower(port, tmp_path)
        followed = False
        try:
            written = _eventually_logged(tmp_path, b"k-roles")
            if written:
                with connect("flashsale_app") as app, app.cursor() as cursor:
                    cursor.execute("INSERT INTO inventory_product (sku, name, strategy, payment_window_s, "
                                   "sale) VALUES ('roles-followed', 'roles', 'atomic', 0, 1)")
                followed = _eventually_logged(tmp_path, b"roles-followed")
        finally:
            said = _stopped(follower)
        assert written and followed, said

        # The exporter reads the server's status (the exporter the stack runs, Debian's)
        # in three connections at most, and nothing of the data.
        with server.connect() as root, root.cursor() as cursor:
            cursor.execute("SHOW CREATE USER 'flashsale_exporter'@'%'")
            assert "MAX_USER_CONNECTIONS 3" in cursor.fetchone()[0]
        with pytest.raises(MySQLdb.OperationalError) as refused:
            connect("flashsale_exporter")  # the data's database, not even opened
        assert refused.value.args[0] == 1044
        assert "mysql_global_status_threads_connected" in _exported(port)


def _binlog_follower(port: int, directory: Path) -> subprocess.Popen:
    """The cluster's mariadb-binlog, its script run here against ``port``, writing the
    log's files into ``directory``."""
    deployment = of_kind(render(K8S / "overlays" / "production"), "Deployment")["mariadb-binlog"]
    script = deployment["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert script.count("--host=mariadb") == 2 and "cd /binlog;" in script
    script = script.replace("--host=mariadb", f"--host=127.0.0.1 --port={port}").replace(
        "cd /binlog;", f"cd {directory};")
    return subprocess.Popen(["bash", "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "MYSQL_PWD": PASSWORDS["flashsale_backup"]})


def _eventually_logged(directory: Path, marker: bytes, seconds: float = 20) -> bool:
    """Whether a log file in ``directory`` holds ``marker`` within ``seconds``."""
    def found() -> bool:
        return any(marker in path.read_bytes() for path in directory.glob("mariadb-bin.*"))
    return bool(eventually(found, seconds=seconds))


def _stopped(process: subprocess.Popen) -> str:
    """``process`` stopped; what it said on stderr."""
    if process.poll() is None:
        process.terminate()
    _, err = process.communicate(timeout=30)
    return err


def _exported(port: int) -> str:
    """What mysqld_exporter serves, run as the exporter's user against ``port``."""
    import tempfile

    from stack.servers import binary

    listen = free_port()
    with tempfile.TemporaryDirectory() as d:
        cnf = os.path.join(d, "my.cnf")
        with open(cnf, "w") as out:
            out.write(f"[client]\nuser=flashsale_exporter\npassword={PASSWORDS['flashsale_exporter']}\n"
                      f"host=127.0.0.1\nport={port}\n")
        process = subprocess.Popen([binary("prometheus-mysqld-exporter"), f"--config.my-cnf={cnf}",
                                    f"--web.listen-address=127.0.0.1:{listen}", "--no-collect.slave_status"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            text = eventually(lambda: _answers(f"http://127.0.0.1:{listen}/metrics"), seconds=30)
        finally:
            process.terminate()
            process.wait(10)
    assert "mysql_up 1" in text, text[-2000:] or "the exporter did not answer"
    return text


def _answers(url: str) -> str:
    """``url``'s text; "" while nothing answers there."""
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.read().decode()
    except OSError:
        return ""
