"""The restore drill (``python -m stack restore-drill``, ``make restore-drill``): a
backup counts once it has been restored. The stack's database is dumped with the
options the cluster's nightly backup uses (``DUMP_OPTIONS``; ``deploy/k8s``), the dump
is restored into a scratch MariaDB of the drill's own, and the copy is compared with
the source table by table: rows and checksum, the stored procedures, and the units an
operator reads (orders by status, the ledger's sales and returns, the stock left and
started with, payments by status).

The source must hold still while it is dumped, or the two cannot be compared: its
figures are read before and after the dump, and a dump during which they moved is
made again."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from .config import StackConfig
from .servers import (
    APP_DATABASE,
    INNODB_IO,
    StackError,
    binary,
    mariadb_app_client,
    mariadb_app_connection,
    mariadb_datadir,
    mariadb_tmpdir,
    mariadbd_as_root,
    tail,
)

# What the nightly backup passes mariadb-dump (deploy/k8s/base/mariadb-backup.yaml; a
# test holds the two the same): one consistent snapshot without locking a table, so a
# sale goes on meanwhile, and the purchase's stored procedures, without which a
# restored database sells nothing under ``atomic``.
DUMP_OPTIONS = ("--single-transaction", "--routines")
KEPT = 7  # dumps kept in the run directory, as the cluster keeps seven nights'
NO_SUCH_TABLE = 1146  # ER_NO_SUCH_TABLE: a dump that left a table out
TRIES = 3  # dumps made while the source keeps changing, before the drill gives up

# The units an operator reads off the copy, beside each table's count and checksum.
UNITS = {
    "orders by status": "SELECT status, COUNT(*), SUM(quantity) FROM orders_order GROUP BY 1 ORDER BY 1",
    "ledger by kind": "SELECT kind, COUNT(*), SUM(quantity) FROM inventory_stockflow GROUP BY 1 ORDER BY 1",
    "stock": "SELECT 'left and started with', SUM(quantity), SUM(initial_quantity) FROM inventory_stock",
    "payments by status": "SELECT status, COUNT(*), SUM(amount) FROM payments_payment GROUP BY 1 ORDER BY 1",
}


class DrillError(StackError):
    """The drill could not run to a comparison (a dump or restore failed, or the source
    never held still)."""


@dataclass(frozen=True)
class Figures:
    """What a database holds, as far as the drill compares it."""

    tables: dict[str, tuple[int, int]]  # table: (rows, CHECKSUM TABLE)
    routines: dict[str, str]  # "PROCEDURE name": a digest of its definition
    units: dict[str, tuple[tuple[Any, ...], ...]]  # UNITS' name: its rows

    def differences(self, other: Figures) -> list[str]:
        """Each way ``other`` (the copy) differs from this (the source), in words."""
        found = []
        for table in sorted(self.tables.keys() | other.tables.keys()):
            mine, theirs = self.tables.get(table), other.tables.get(table)
            if mine != theirs:
                found.append(f"table {table}: (rows, checksum) {mine} in the source, {theirs} in the copy")
        for routine in sorted(self.routines.keys() | other.routines.keys()):
            if self.routines.get(routine) != other.routines.get(routine):
                state = "missing from the copy" if routine not in other.routines else "differs"
                found.append(f"{routine}: {state}")
        for name in UNITS:
            if self.units[name] != other.units[name]:
                found.append(f"{name}: {self.units[name]} in the source, {other.units[name]} in the copy")
        return found


def figures(conn) -> Figures:
    """The figures of the database ``conn`` has chosen."""
    import MySQLdb

    with closing(conn.cursor()) as cursor:
        cursor.execute("SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'")
        names = sorted(row[0] for row in cursor.fetchall())
        tables = {}
        for name in names:
            cursor.execute(f"SELECT COUNT(*) FROM `{name}`")
            (rows,) = cursor.fetchone()
            cursor.execute(f"CHECKSUM TABLE `{name}`")
            tables[name] = (int(rows), int(cursor.fetchone()[1]))
        cursor.execute("SELECT ROUTINE_TYPE, ROUTINE_NAME, ROUTINE_DEFINITION "
                       "FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()")
        routines = {f"{kind} {name}": hashlib.sha256((body or "").encode()).hexdigest()[:16]
                    for kind, name, body in cursor.fetchall()}
        units: dict[str, tuple[tuple[Any, ...], ...]] = {}
        for label, query in UNITS.items():
            try:
                cursor.execute(query)
            except MySQLdb.ProgrammingError as e:
                if e.args[0] != NO_SUCH_TABLE:
                    raise
                units[label] = (("no such table",),)
                continue
            units[label] = tuple(tuple(_plain(v) for v in row) for row in cursor.fetchall())
    return Figures(tables=tables, routines=routines, units=units)


def _plain(value: Any) -> Any:
    """A SUM's Decimal as the integer it is (the sums are of integer columns)."""
    return int(value) if isinstance(value, Decimal) else value


def source_figures(config: StackConfig, database: str) -> Figures:
    with closing(mariadb_app_connection(config, database=database)) as conn:
        return figures(conn)


def _said(result: subprocess.CompletedProcess[bytes]) -> str:
    return result.stderr.decode(errors="replace").strip()


def dump(config: StackConfig, database: str, target: Path, options: Sequence[str] = DUMP_OPTIONS) -> None:
    """``database`` dumped as the nightly backup dumps it, gzipped into ``target``
    (written whole or not at all)."""
    part = target.with_name(target.name + ".part")
    # The password from the environment, as the CronJob gives it.
    client, env = mariadb_app_client(config, "mariadb-dump")
    with gzip.open(part, "wb") as out:
        result = subprocess.run([*client, *options, database], capture_output=True, check=False, env=env)
        out.write(result.stdout)
    if result.returncode:
        part.unlink(missing_ok=True)
        raise DrillError(f"mariadb-dump failed ({result.returncode}): {_said(result)}")
    part.rename(target)


@dataclass(frozen=True)
class ScratchMariaDB:
    """A MariaDB server of the drill's own: a data directory in a temporary directory,
    reached by its socket as root (and by no port, unless it was given one)."""

    socket: Path

    def connect(self, database: str | None = None):
        import MySQLdb

        chosen = {} if database is None else {"database": database}
        return MySQLdb.connect(unix_socket=str(self.socket), user="root", autocommit=True, **chosen)


@contextmanager
def scratch_mariadb(*options: str, ready_timeout: float = 60.0) -> Iterator[ScratchMariaDB]:
    """A new, empty MariaDB server, stopped by its PID and removed afterwards;
    ``options`` are mariadbd's besides (a port to listen on: ``--port=N``)."""
    d = Path(tempfile.mkdtemp(prefix="flashsale-drill-"))
    log = d / "error.log"
    process = None
    try:
        mariadb_datadir(d / "data", log=d / "install.log")
        server = ScratchMariaDB(socket=d / "mysqld.sock")
        process = subprocess.Popen(
            [binary("mariadbd"), "--no-defaults", f"--datadir={d / 'data'}", f"--socket={server.socket}",
             f"--pid-file={d / 'mysqld.pid'}", f"--log-error={log}", "--innodb-buffer-pool-size=64M",
             f"--tmpdir={mariadb_tmpdir(d / 'data')}", *INNODB_IO,
             *(options or ("--skip-networking", "--skip-log-bin")), *mariadbd_as_root()],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + ready_timeout
        while True:
            try:
                server.connect().close()
                break
            except Exception:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise DrillError(f"the scratch MariaDB did not start\n{tail(log)}") from None
                time.sleep(0.2)
        yield server
    finally:
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(d, ignore_errors=True)


def restore(server: ScratchMariaDB, database: str, source: Path) -> None:
    """The dump ``source`` loaded into a new database ``database`` on ``server``, with
    the client an operator restores with (``gunzip -c FILE | mariadb --comments DATABASE``:
    without ``--comments`` the client strips the comments out of the stored procedures'
    bodies)."""
    with closing(server.connect()) as conn, closing(conn.cursor()) as cursor:
        cursor.execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4")
    with gzip.open(source, "rb") as dumped:
        result = subprocess.run([binary("mariadb"), f"--socket={server.socket}", "--user=root", "--comments",
                                 database], input=dumped.read(), capture_output=True, check=False)
    if result.returncode:
        raise DrillError(f"the restore failed ({result.returncode}): {_said(result)}")


@dataclass(frozen=True)
class Drill:
    dump: Path
    source: Figures
    copy: Figures
    tries: int
    seconds: float

    @property
    def rows(self) -> int:
        return sum(rows for rows, _ in self.source.tables.values())

    @property
    def differences(self) -> list[str]:
        return self.source.differences(self.copy)

    def report(self) -> str:
        lines = [f"dump: {self.dump} ({self.dump.stat().st_size:,} bytes, {self.tries} "
                 f"{'try' if self.tries == 1 else 'tries'}), restored into a scratch MariaDB and compared "
                 f"in {self.seconds:.1f} s",
                 f"tables: {len(self.source.tables)}, their rows: {self.rows:,}; "
                 f"stored routines: {len(self.source.routines)}"]
        lines += [f"{name}: {rows}" for name, rows in self.source.units.items()]
        found = self.differences
        lines.append("the copy holds what the source holds" if not found
                     else "THE COPY DIFFERS:\n  " + "\n  ".join(found))
        return "\n".join(lines)


def restore_drill(config: StackConfig, database: str = APP_DATABASE, *,
                  options: Sequence[str] = DUMP_OPTIONS) -> Drill:
    """Dump ``database``, restore it into a scratch server, compare; the dump is kept in
    ``<run dir>/backups`` (the last ``KEPT``)."""
    started = time.monotonic()
    backups = config.run_dir / "backups"
    backups.mkdir(parents=True, exist_ok=True)
    tries = 0
    while True:
        tries += 1
        before = source_figures(config, database)
        target = backups / f"{database}-{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}.sql.gz"
        dump(config, database, target, options)
        if source_figures(config, database) == before:
            break
        target.unlink()
        if tries == TRIES:
            raise DrillError(f"{database} changed during each of {TRIES} dumps: "
                             "run the drill while no sale writes")
    for old in sorted(backups.glob(f"{database}-*.sql.gz"))[:-KEPT]:
        old.unlink()
    with scratch_mariadb() as server:
        restore(server, database, target)
        with closing(server.connect(database)) as conn:
            copy = figures(conn)
    return Drill(dump=target, source=before, copy=copy, tries=tries, seconds=time.monotonic() - started)
