"""A Redis master fails over before the lock reached its replica (S10), and the two
fixes: WAIT for a replica's acknowledgement, and RedLock over independent masters.

The scenario starts its own redis-servers (stack.scratch): a master, a replica that
reaches it through a link the scenario can partition (scenarios.partition), and
three independent masters for RedLock. The failover is done by hand, as Sentinel
would: the master is killed and the replica promoted with REPLICAOF NO ONE.
"""

from __future__ import annotations

import time

from locking.backends.redis.redlock import RedlockBackend
from locking.backends.redis.setnx import SetnxLockBackend
from stack.scratch import ScratchRedis, redis_servers, start_redis

from .base import Half, Outcome, Scenario
from .context import Context
from .partition import Link


def _wait_for(condition, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _failover(**setnx_options) -> dict:
    """A takes the lock on the master while the replica is cut off; the master dies
    and the replica is promoted; B asks the promoted replica for the same lock."""
    with redis_servers(1) as (master,):
        link = Link(master.port)
        replica = start_redis("--replicaof", "127.0.0.1", str(link.port))
        try:
            master_client, replica_client = master.client(), replica.client()
            # In sync, and proven to be: a write on the master shows on the replica.
            master_client.set("s10:probe", "1")
            _wait_for(lambda: replica_client.get("s10:probe") == b"1", "the replica to sync")

            link.hold()  # partitioned: from here the master's writes do not arrive
            a_backend = SetnxLockBackend("s10-a", {"url": master.url, **setnx_options})
            a = a_backend.lock("stock:s10")
            a_holds = a.acquire(blocking=False)
            on_replica = bool(replica_client.exists(a.key))

            master.crash()
            link.close()
            replica_client.execute_command("REPLICAOF", "NO", "ONE")  # the failover
            b_backend = SetnxLockBackend("s10-b", {"url": replica.url})
            b_holds = b_backend.lock("stock:s10").acquire(blocking=False)
            for backend in (a_backend, b_backend):
                backend.close()
            return {"A holds (on the master)": a_holds,
                    "lock key on the replica at failover": on_replica,
                    "B got it on the promoted replica": b_holds,
                    "holders at once": int(a_holds) + int(b_holds)}
        finally:
            link.close()
            replica.stop()


# Seconds each master may take to answer: they are all alive here, so long enough
# that no master's vote is lost to a slow machine. RedlockBackend's default is short,
# for a dead master to cost little; with it, a throttled machine lost A a vote, and a
# bare majority is what one master coming back empty undoes (RedLock's known limit).
LIVE_MASTER_S = 5.0


def _redlock_with_a_master_restarted_empty() -> dict:
    """A takes the lock on three independent masters; one crashes and comes back
    empty (no persistence); B asks all three for the same lock."""
    with redis_servers(3) as masters:
        options = {"urls": [m.url for m in masters], "socket_timeout": LIVE_MASTER_S}
        backend = RedlockBackend("s10", options)
        restarted: ScratchRedis | None = None
        try:
            a = backend.lock("stock:s10")
            a_holds = a.acquire(blocking=False)
            a_votes = a.votes
            masters[0].crash()
            restarted = start_redis(port=masters[0].port)
            b = RedlockBackend("s10-b", options)
            b_lock = b.lock("stock:s10")
            b_holds = b_lock.acquire(blocking=False)
            b_votes = b_lock.votes
            b.close()
            return {"A holds (RedLock)": f"{a_votes} of 3 masters" if a_holds else "no",
                    "B after one master restarted empty": f"{b_votes} of 3, needs 2",
                    "holders at once (RedLock)": int(a_holds) + int(b_holds)}
        finally:
            backend.close()
            if restarted is not None:
                restarted.stop()


def s10_failover_before_replication(ctx: Context) -> Outcome:
    figures = _failover()
    broken = Half("setnx on a master with an async replica", figures,
                  failed=figures["holders at once"] > 1)
    figures = {**_failover(replicas=1, replica_timeout_ms=100), **_redlock_with_a_master_restarted_empty()}
    fixed = Half("WAIT 1 replica (100 ms); RedLock over 3 masters", figures,
                 failed=figures["holders at once"] != 1 or figures["holders at once (RedLock)"] != 1)
    return Outcome(broken, fixed)


SCENARIOS = [
    Scenario("S10", "Redis fails over before the lock reached the replica", "000 集群问题1, 003, 004",
             "Redis replicates asynchronously. The scenario starts a master and a replica, cuts "
             "the link between them, lets A take the lock on the master, kills the master and "
             "promotes the replica, as Sentinel would: the lock is not there, and B takes it "
             "too. Fixes: count the acquisition only once a replica acknowledged it (WAIT; A is "
             "refused while the link is down), or RedLock over three independent masters: A "
             "holds all three, and one master coming back empty gives B one vote of the two it "
             "needs. Had A held a bare majority, that master would give B its majority: RedLock "
             "asks a restarted master to stay away for a lease's length.",
             s10_failover_before_replication, needs=("redis-server",)),
]
