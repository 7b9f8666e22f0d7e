"""What a crashed Redis takes back that it had already answered, under each of its
append-only file's fsync policies: why the gate's Redis runs ``always``.

    python -m benchmarks.aof_crash [--kills 10] [--docs]

Each kill: a redis-server of its own, its AOF under the policy measured; one client
increments a counter as fast as it is answered, each reply a write it was told is
done (a 201, for the gate); beside it a writer fills the page cache of the same disk,
as MariaDB and the persisters do on a busy machine, so that Redis's fsyncs take
milliseconds rather than microseconds. Under ``everysec`` the server is SIGKILLed
while INFO says its background fsync runs (Redis then holds each new write in memory,
for up to 2 s, and answers it all the same); ``always`` fsyncs before it answers and
has no background fsync, so it is killed at a random moment of the same stretch.
Started again from its AOF, it is asked for the counter: every answered increment it
no longer has was taken back.

A kill under ``everysec`` that finds no fsync running within 10 s is made all the
same and counted apart (the disk was too fast to catch one).
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from loadtest.measured import recorded
from stack.scratch import start_redis

POLICIES = ("everysec", "always")
CATCH_WITHIN = 10.0  # seconds to find a background fsync running
CHUNK = 1 << 20  # the page-cache writer's write
DIRTY = 512  # chunks it rewrites in a loop: a file of 512 MB, never fsynced


@dataclass(frozen=True)
class Kill:
    policy: str
    answered: int  # the last value the client was answered
    kept: int  # the value the restarted server has
    during_fsync: bool  # killed while a background fsync ran

    @property
    def taken_back(self) -> int:
        return max(0, self.answered - self.kept)


def _dirty(directory: Path, stop: threading.Event) -> None:
    """Write into the page cache of ``directory``'s disk until ``stop``."""
    block = os.urandom(CHUNK)
    with open(directory / "dirty", "wb", buffering=0) as f:
        n = 0
        while not stop.is_set():
            if n == DIRTY:
                f.seek(0)
                n = 0
            f.write(block)
            n += 1


def _counting(port: int, answered: list[int]) -> None:
    """Increment until the server goes; ``answered[0]``: the last value answered."""
    client = redis.Redis(port=port, socket_timeout=5)
    try:
        while True:
            answered[0] = client.incr("answered")
    except redis.RedisError:
        return


def _fsync_running(client: redis.Redis) -> bool:
    try:
        return client.info("persistence").get("aof_pending_bio_fsync", 0) > 0
    except redis.RedisError:
        return False


def _during_fsync(watcher: redis.Redis, answered: list[int]) -> bool:
    """Return once a write was answered while a background fsync ran, and that fsync
    still runs (False: none within ``CATCH_WITHIN`` seconds)."""
    deadline = time.monotonic() + CATCH_WITHIN
    while time.monotonic() < deadline:
        if not _fsync_running(watcher):
            continue
        before = answered[0]
        while answered[0] == before and time.monotonic() < deadline:
            time.sleep(0.0002)
        if _fsync_running(watcher):
            return True
    return False


def kill_once(policy: str, directory: Path, rng: random.Random) -> Kill:
    """One server, written to and killed as the module says; its data in ``directory``
    (made here)."""
    directory.mkdir(parents=True, exist_ok=True)
    args = ("--appendonly", "yes", "--appendfsync", policy, "--dir", str(directory))
    server = start_redis(*args)
    answered = [0]
    counter = threading.Thread(target=_counting, args=(server.port, answered))
    counter.start()
    watcher = server.client()
    caught = False
    try:
        if policy == "everysec":
            caught = _during_fsync(watcher, answered)
        else:
            time.sleep(rng.uniform(0.5, 1.5))
        server.crash()
    finally:
        server.stop()  # its log's directory; the data stays in ``directory``
        counter.join()
    again = start_redis(*args, port=server.port)
    try:
        kept = int(again.client().get("answered") or 0)
    finally:
        again.stop()
    return Kill(policy, answered[0], kept, caught)


def measure(kills: int, directory: Path, seed: int = 0) -> list[Kill]:
    """``kills`` kills of each policy, alternating, with the page cache kept dirty."""
    rng = random.Random(seed)
    stop = threading.Event()
    dirty = threading.Thread(target=_dirty, args=(directory, stop), daemon=True)
    dirty.start()
    done = []
    try:
        for n in range(kills):
            for policy in POLICIES if n % 2 == 0 else POLICIES[::-1]:
                data = directory / f"{policy}-{n}"
                done.append(kill_once(policy, data, rng))
                shutil.rmtree(data)
    finally:
        stop.set()
        dirty.join()
    return done


def report(command: str, kills: list[Kill]) -> None:
    print(f"`{command}`: a redis-server a kill, one client incrementing as fast as it is answered, the "
          "page cache of the same disk kept dirty beside it; SIGKILL, then started again from its AOF\n")
    print("| appendfsync | kills | killed during a background fsync | kills that took back answered "
          "writes | answered writes taken back, most in one kill | answered writes in all |")
    print("|---|---:|---:|---:|---:|---:|")
    for policy in POLICIES:
        mine = [k for k in kills if k.policy == policy]
        lossy = [k for k in mine if k.taken_back]
        print(f"| {policy} | {len(mine)} | {sum(k.during_fsync for k in mine)} | {len(lossy)} | "
              f"{max((k.taken_back for k in mine), default=0):,} | {sum(k.answered for k in mine):,} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=10, help="kills of each policy")
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/aof-crash.md, for the docs")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.aof_crash " + shlex.join(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="flashsale-aof-crash-") as directory:
        kills = measure(args.kills, Path(directory))
    with recorded("aof-crash", command, write=args.docs):
        report(command, kills)
    return 0


if __name__ == "__main__":
    sys.exit(main())
