"""What a SIGKILLed MariaDB comes back with, under the InnoDB I/O the stack starts it
with and under the server's default: why the stack's MariaDB writes through the page
cache (``stack.servers.INNODB_IO``).

    python -m benchmarks.mariadb_crash [--kills 30] [--docs]

Each configuration: a MariaDB of its own, started as the stack starts its own (with
or without ``INNODB_IO``), on one data directory, killed and started
again ``--kills`` times, as the chaos faults kill the stack's; the configurations run
at once, so that each kill of either finds the machine as busy. Between kills,
purchase-shaped transactions run on it from several connections, each as the ``mysql``
strategy makes one (a claim row inserted, the stock row updated, an order inserted,
the claim deleted, commit), and the client counts every commit it was answered. The
server flushes its dirty pages all the time (``innodb_max_dirty_pages_pct=0``) so that
a kill finds page writes under way, as it does on a stack that has run for minutes.

Started again, the server is judged: it refused to start (its crash recovery failed),
it started but its log reports corruption, it stopped by itself before the next kill
(an assertion, as when recovery left a corrupted undo log), or it lost a commit it had
answered or let the stock and the orders disagree. A data directory that will not
start is made anew, and the kills go on.
"""

from __future__ import annotations

import argparse
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.measured import recorded
from stack.config import StackConfig
from stack.scratch import free_port
from stack.servers import INNODB_IO, mariadb, mariadb_datadir

# Each configuration: whether the server starts with the stack's InnoDB I/O options.
CONFIGURATIONS: dict[str, bool] = {
    "the stack's (buffered, fsync)": True,
    "MariaDB's default (O_DIRECT)": False,
}
ROLLED_BACK = {1205, 1213}  # a lock wait timed out, a deadlock: the transaction is rolled back
# Beside the stack's command line: the dirty pages flushed all the time.
FLUSHING = ("--innodb-max-dirty-pages-pct=0", "--innodb-max-dirty-pages-pct-lwm=0")
CONNECTIONS = 12
NAMES = [f"stock:sku{p}:{s}" for p in range(3) for s in range(4)]  # a product's segments
STOCK = 10_000_000
READY_WITHIN = 120.0
RESTART_AFTER = (0.0, 0.5, 2.0)  # seconds from the kill; the chaos fault's is 2 s

SCHEMA = [
    "CREATE DATABASE drill",
    # The lock table as ``locking.models.LockClaim`` makes it: a floor row per name.
    "CREATE TABLE drill.claim (id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(255) "
    "COLLATE utf8mb4_nopad_bin NOT NULL, slot SMALLINT UNSIGNED NOT NULL, UNIQUE KEY (name, slot))",
    "CREATE TABLE drill.stock (id INT PRIMARY KEY, units INT NOT NULL)",
    "CREATE TABLE drill.orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, stock_id INT NOT NULL, "
    "idempotency_key CHAR(32) NOT NULL UNIQUE, note VARCHAR(200) NOT NULL)",
]


@dataclass
class Tally:
    """What the kills of one configuration came back with."""

    configuration: str
    kills: int = 0
    refused: int = 0  # recovery failed: the server did not start
    corruption_reported: int = 0  # it started, its log reporting corruption
    stopped_after: int = 0  # it stopped by itself before the next kill
    lost_commits: int = 0  # kills after which an answered commit was missing
    ledger_mismatches: int = 0  # kills after which stock taken != orders
    answered: int = 0  # commits answered over all kills
    errors: list[str] = field(default_factory=list)  # the first lines of each bad recovery


class Server:
    """mariadbd as the stack starts it (``stack.servers.mariadb``), its run directory
    ``directory``, with or without the stack's InnoDB I/O options (``io``); reached by
    its socket as root."""

    def __init__(self, directory: Path, io: bool):
        config = StackConfig.from_env().replace(run_dir=directory, mysql_port=free_port())
        stack = mariadb(config)
        self.command = [*(a for a in stack.command if io or a not in INNODB_IO), *FLUSHING]
        self.directory = config.dir("mariadb")
        self.socket, self.log, self.probe = self.directory / "mysqld.sock", stack.logs[0], stack.probe
        self.process: subprocess.Popen | None = None
        self.since = 0  # where its log stood when it last started

    def make(self) -> None:
        shutil.rmtree(self.directory / "data", ignore_errors=True)
        mariadb_datadir(self.directory / "data", log=self.directory / "install.log")
        if not self.start():
            raise RuntimeError(f"a new MariaDB did not start:\n{self.log.read_text()[-2000:]}")
        with self.connect() as db:
            cursor = db.cursor()
            for statement in SCHEMA:
                cursor.execute(statement)
            cursor.executemany("INSERT INTO drill.claim (name, slot) VALUES (%s, 0)", [[n] for n in NAMES])
            cursor.executemany("INSERT INTO drill.stock VALUES (%s, %s)",
                               [[i, STOCK] for i in range(len(NAMES))])

    def connect(self):
        import MySQLdb

        return MySQLdb.connect(unix_socket=str(self.socket), user="root", autocommit=True, connect_timeout=2)

    def log_size(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def start(self) -> bool:
        """Start it and wait until it answers; False if it exits first."""
        self.since = self.log_size()
        self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        deadline = time.monotonic() + READY_WITHIN
        while self.process.poll() is None and time.monotonic() < deadline:
            try:
                self.probe()
                return True
            except Exception:
                time.sleep(0.1)
        self.kill()
        return False

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()


def _buying(server: Server, stop: threading.Event, answered: list[int], lock: threading.Lock,
            rng: random.Random) -> None:
    """Purchases as the ``mysql`` strategy makes them until ``stop``: a deadlock or a
    lock wait that timed out rolls back and buys again, as the strategy retries; a
    server gone (the kill) is connected to again."""
    import MySQLdb

    while not stop.is_set():
        try:
            db = server.connect()
            db.autocommit(False)
            cursor = db.cursor()
            while not stop.is_set():
                try:
                    _buy(cursor, rng)
                    db.commit()
                except MySQLdb.OperationalError as e:
                    if e.args[0] not in ROLLED_BACK:
                        raise
                    db.rollback()
                    continue
                with lock:
                    answered[0] += 1
        except MySQLdb.Error:
            time.sleep(0.05)


def _buy(cursor, rng: random.Random) -> None:
    slot = rng.randrange(len(NAMES))
    cursor.execute("INSERT INTO drill.claim (name, slot) VALUES (%s, 1)", [NAMES[slot]])
    claim = cursor.lastrowid
    cursor.execute("UPDATE drill.stock SET units = units - 1 WHERE id = %s", [slot])
    cursor.execute("INSERT INTO drill.orders (stock_id, idempotency_key, note) VALUES (%s, %s, %s)",
                   [slot, f"{rng.getrandbits(128):032x}", "x" * rng.randrange(50, 200)])
    cursor.execute("DELETE FROM drill.claim WHERE id = %s", [claim])


def _judge(server: Server, tally: Tally, answered: int) -> None:
    """The server just started again after a kill: count what it came back with
    (``answered``: the commits its data directory was answered, every kill so far)."""
    errors = _errors(server)
    if errors:
        tally.corruption_reported += 1
        tally.errors.append(f"started, reporting: {errors[0]}")
    try:
        with server.connect() as db:
            cursor = db.cursor()
            cursor.execute("SELECT COUNT(*) FROM drill.orders")
            orders = cursor.fetchone()[0]
            cursor.execute("SELECT %s * COUNT(*) - SUM(units) FROM drill.stock", [STOCK])
            taken = int(cursor.fetchone()[0])
    except Exception:
        return  # it stopped again at once: the next kill finds it gone and counts it
    # A commit under way at the kill may have landed unanswered: more orders is fine.
    if orders < answered:
        tally.lost_commits += 1
    if taken != orders:
        tally.ledger_mismatches += 1


def measure(configuration: str, kills: int, directory: Path, rng: random.Random) -> Tally:
    """``kills`` kills of a server under ``configuration``, its data in ``directory``."""
    tally = Tally(configuration)
    server = Server(directory, CONFIGURATIONS[configuration])
    server.make()
    answered, lock = [0], threading.Lock()  # commits answered on this data directory

    def made_anew(why: str) -> None:
        tally.errors.append(why)
        tally.answered += answered[0]
        answered[0] = 0
        server.make()

    for _ in range(kills):
        if server.process is None or server.process.poll() is not None:
            tally.stopped_after += 1
            made_anew(f"stopped by itself: {_first(_errors(server))}")
        stop = threading.Event()
        buyers = [threading.Thread(target=_buying,
                                   args=(server, stop, answered, lock, random.Random(rng.random())))
                  for _ in range(CONNECTIONS)]
        for buyer in buyers:
            buyer.start()
        time.sleep(rng.uniform(0.5, 4.0))
        server.kill()
        stop.set()
        for buyer in buyers:
            buyer.join()
        tally.kills += 1
        time.sleep(rng.choice(RESTART_AFTER))
        if server.start():
            _judge(server, tally, answered[0])
        else:
            tally.refused += 1
            made_anew(f"refused: {_first(_errors(server))}")
    tally.answered += answered[0]
    server.kill()
    return tally


def _errors(server: Server) -> list[str]:
    """The lines of the server's log since it last started that report an error."""
    with server.log.open(errors="replace") as log:
        log.seek(server.since)
        return [line.strip() for line in log if "[ERROR]" in line or "Assertion failure" in line]


def _first(errors: list[str]) -> str:
    return errors[0] if errors else "no error in its log"


def report(command: str, tallies: list[Tally]) -> None:
    print(f"`{command}`: a MariaDB of its own for each configuration, both at once, purchase-shaped "
          f"transactions from {CONNECTIONS} connections with its dirty pages flushed all the time; "
          "SIGKILL after 0.5 to 4 s, then started again on the same data directory 0, 0.5 or 2 s later\n")
    print("| InnoDB I/O | kills | recoveries refused | started reporting corruption | stopped by itself "
          "after | lost an answered commit | stock and orders disagree | commits answered |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for t in tallies:
        print(f"| {t.configuration} | {t.kills} | {t.refused} | {t.corruption_reported} | "
              f"{t.stopped_after} | {t.lost_commits} | {t.ledger_mismatches} | {t.answered:,} |")
    failures = [(t.configuration, e) for t in tallies for e in t.errors]
    if failures:
        print("\nThe first error of each bad recovery, as the server logged it:\n")
        for configuration, error in failures:
            print(f"- {configuration}: `{error[:200]}`")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=30, help="kills of each configuration")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/mariadb-crash.md, for the docs")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.mariadb_crash " + shlex.join(sys.argv[1:] if argv is None else argv)
    # The configurations at once, each on a server of its own and driven from a process
    # of its own: the same machine, busy with both, for each kill of either.
    with tempfile.TemporaryDirectory(prefix="flashsale-mariadb-crash-") as directory, \
            ProcessPoolExecutor(len(CONFIGURATIONS)) as pool:
        runs = [pool.submit(measure, c, args.kills, Path(directory) / str(n), random.Random(args.seed + n))
                for n, c in enumerate(CONFIGURATIONS)]
        tallies = [run.result() for run in runs]
    with recorded("mariadb-crash", command, write=args.docs):
        report(command, tallies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
