"""Nemeses that break links between test hosts (``stack.hosts``), for a sale whose
instances run on hosts of their own (``stack.hosted``): the kernel drops the
packets, nothing is signalled to any process. Each strikes app1's links mid-sale
(or the gate persister's) and heals after ``down_seconds``: by default longer than
the locks' 5 s lease, so a holder cut off keeps working past it, as in Kleppmann's
critique of Redlock (article 003); the lessons on leases and sessions time theirs to
the lease they outlive. One breaks no link: it steps the locks' Redis's wall clock
forward (``stack.clock``), the clock jump of the same critique.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from chaos.faults import OnSale, until_batch_in_hand
from stack.config import StackConfig
from stack.hosted import ZK_PORT, HostedApps
from stack.hosted_redis import REDIS_GATE_PORT, REDIS_PORT

from .holders import held_a_while, lock_failed_over, promoted, setnx_holder, someone_asks

# Past the Redis locks' 5 s lease, and healed just before TCP's fifth retransmission
# of what was sent as it struck (6.2 s after), so stalled connections resume at the
# heal rather than at the sixth (12.6 s after): each cell is 6 s shorter.
PAST_THE_LEASE = 6.0

# The lesson on leases needs a holder's stalled write to land after its lease ran out
# and another holder sold: a partition longer than the lease, and shorter than what
# ends a stalled transaction first (MariaDB's idle-transaction timeout, 6 s by default,
# and the purchase's 8 s deadline). So its instances take a 2 s lease, a 1 s lock wait
# (waiters give up and come back through app2 in time), and a 10 s idle-transaction
# timeout. When the write lands is TCP's: retransmitted 0.2, 0.6, 1.4, 3.0 and 6.2 s
# after it was sent (Linux's 200 ms minimum timeout, doubling). The partition lasts
# 2.5 s: app2 has sold by then (its lease came 2 s after the cut), and the write,
# sent about 0.16 s after the cut, lands with the retransmission at 3 s, not 6.
LEASE_LESSON = {"FLASHSALE_SETNX_TTL_MS": "2000", "FLASHSALE_LOCK_WAIT_TIMEOUT_S": "1",
                "DB_IDLE_TRANSACTION_TIMEOUT_S": "10"}
PAST_A_2_S_LEASE = 2.5
# ZooKeeper's lease is the session: 4 s, the least its 2 s tick allows. A partition of
# 5 s outlives it by a second, so the session expires and another contender holds.
PAST_THE_SESSION = 5.0
# The clock-jump lesson's critical section: the step strikes a holder found with a
# waiter beside it, some tens of ms after it is seen; the next waiter must then take
# the lock and read the stock before the holder writes.
CLOCK_JUMP_SECTION_MS = 500.0
# The failover: Sentinel counts the master down after 1 s and promotes the replica
# within another second or two; app2's Redis connections give up on the old master
# after a 1 s socket timeout and find the new one: app2 sells 3 to 5 s after the cut.
# app1's stalled write must land after that, so the heal at 8 s misses TCP's
# retransmission at 6.2 s and the write lands with the one at 12.6 s: the lesson's
# instances give a purchase 20 s (and MariaDB's idle transactions 30 s), so that
# nothing ends app1's transaction before. A heal before the promotion would undo the
# lesson (the old master back, and Sentinel no longer failing over), so on a machine
# slow enough for Sentinel to be late, the heal waits for it, up to 12 s after the
# cut: still before the write's retransmission lands.
FAILOVER_LESSON = {**LEASE_LESSON, "FLASHSALE_LOCK_REDIS_TIMEOUT_S": "1",
                   "FLASHSALE_PURCHASE_DEADLINE_S": "20", "DB_IDLE_TRANSACTION_TIMEOUT_S": "30"}
THROUGH_A_FAILOVER = 8.0
FAILOVER_PATIENCE = 4.0
# The failover's cut must fall between app1's read and its write, and it comes later
# than the other lessons' (two partitions, after the holder is seen): a busy machine
# can delay it past the write, which then holds the row through the failover, and the
# unfenced half sells safely by accident. A 1,200 ms section, and the holder seen
# 100 ms in, leave the cut a second, however slowly this machine starts its commands.
# The write, sent about 1.1 s after the cut, is retransmitted 7.3 s after it (before
# the heal at 8 s: lost) and lands 13.7 s after it, inside the purchase's 20 s.
FAILOVER_SECTION_MS = 1200.0
FAILOVER_HELD = 0.1
# The gate's failover: the primary cut off from its replica before the sale's first
# purchase (the gate sells a small stock in less time than a strike at an order takes
# to land), then, once it has run three scripts the replica never received (or a
# second passed), from everyone for 6 s: the replica is promoted 2 to 3 s in, and the
# old primary comes back as its replica after the heal, which waits for the promotion
# (6 s more at the most) on a machine slow enough for it to come later.
UNREPLICATED = 3
GATE_FAILOVER = 6.0
GATE_PATIENCE = 6.0
# The clock jump: 5 s forward, past the lesson's 2 s lease, so the holder's key
# expires the moment Redis's clock moves. The clock stays ahead: nothing to heal.
CLOCK_STEP = 5.0


@dataclass(frozen=True)
class LinkFault:
    name: str
    summary: str
    act: Callable[[HostedApps], None]
    down_seconds: float = PAST_THE_LEASE
    loses_redis: bool = False
    # Until it strikes, every buyer buys from app1, so that it strikes app1 holding the lock.
    first_app: bool = False
    # The instances it needs: their critical-section delay (None: the run's); fenced
    # False: the fencing stamp off (the broken half: not linearizable, as designed).
    section_delay_ms: float | None = None
    fenced: bool = True
    environment: tuple[tuple[str, str], ...] = ()  # over the stack's settings
    sentinel: bool = False  # the locks' Redis with a replica and Sentinel
    clock: bool = False  # the locks' Redis on a clock the nemesis can step
    # Not None: the gate's Redis with a replica behind Sentinel, each purchase waiting
    # for this many replicas (FLASHSALE_GATE_REPLICAS); 0 loses acknowledged orders, as designed.
    gate_replicas: int | None = None
    # It strikes at this order (None: the run's trigger; 0: as the sale opens, after ``before``).
    trigger: int | None = None
    gate_cluster: bool = False  # the gate's Redis a Cluster of three shards, a replica each
    # Its first step, taken once the sale is open and before its first purchase: a
    # gate sells a small stock in less time than a strike takes to land.
    before: Callable[[HostedApps], None] | None = None
    window: bool = False  # the sale has a payment window (an expirer and the provider's stand-in on hosts)
    # The heal, due ``down_seconds`` after the strike, waits until this holds (a
    # replica promoted), ``patience`` seconds more at the most: on a slower machine
    # the failover the lesson needs comes later, and a heal before it undoes it.
    heal_once: Callable[[HostedApps], bool] | None = None
    patience: float = 0.0
    hosted: HostedApps | None = None  # bound by ``on``
    # What a sale asks of any fault (``chaos.faults.Fault``): none of these here.
    pays_twice: float = 0.0
    reopens: bool = False
    stagger_s: float = 0.0

    @property
    def as_designed(self) -> bool:
        """A loss the cell sets out to show: a lock unfenced, the gate's Redis without
        a replica waited for."""
        return not self.fenced or self.gate_replicas == 0

    def on(self, hosted: HostedApps) -> LinkFault:
        return dataclasses.replace(self, hosted=hosted)

    def for_sale(self, sale: OnSale) -> LinkFault:
        return self

    def before_sale(self, config: StackConfig) -> None:
        if self.before is not None:
            self.before(self.hosted)

    def inject(self, config: StackConfig) -> list[str]:
        self.act(self.hosted)
        return [self.name]

    def heal(self, config: StackConfig, names: list[str]) -> None:
        if self.heal_once is not None:
            deadline = time.monotonic() + self.patience
            while not self.heal_once(self.hosted) and time.monotonic() < deadline:
                time.sleep(0.1)
        for host in self.hosted.net.hosts.values():
            host.heal()


def _cut_the_holder(hosted: HostedApps) -> None:
    """Cut app1 off from MariaDB while it holds the setnx lock (every buyer buys from
    app1 until the strike, so the holder is app1's), watched in the hosts' Redis.

    The holder must still hold the lock once the cut is in place: on a loaded machine
    the looks and the cut itself can take longer than the rest of its section, and a
    cut that lands after its commit strikes nothing the lesson needs. Such a cut is
    undone at once (app1's packets of those milliseconds are sent again) and the next
    holder struck, for 5 s at most; then the last cut stays."""
    client = redis.Redis(host=hosted.redis.address, port=REDIS_PORT, socket_timeout=1)
    try:
        deadline = time.monotonic() + 5
        while True:
            seen = held_a_while(lambda: setnx_holder(client))
            hosted.apps[0].partition(hosted.db)
            if seen is None or setnx_holder(client) == seen or time.monotonic() > deadline:
                return
            hosted.apps[0].heal()
    finally:
        client.close()


def _fail_over_under_the_holder(hosted: HostedApps) -> None:
    """Articles 000 and 003: app1 takes the setnx lock on the master after the link to
    the replica broke, so the key never reaches it; then the master is cut off from
    everyone and Sentinel promotes the replica, where the lock is free. app1 is cut
    off from MariaDB at the same moment, so it is still inside its critical section
    when app2 takes the lock from the new master: two holders at once."""
    master = hosted.master()
    replica = next(h for h in hosted.net.hosts.values() if h.name in ("redis", "redis2") and h is not master)
    client = redis.Redis(host=master.address, port=REDIS_PORT, socket_timeout=1)
    try:
        master.partition(replica)  # from now on the master's writes stay on it
        before = setnx_holder(client)  # read after the cut: a holder of then may have been replicated
        held_a_while(lambda: token if (token := setnx_holder(client)) != before else None,
                      held=FAILOVER_HELD)
    finally:
        client.close()
    hosted.apps[0].partition(hosted.db)
    master.partition(replica, hosted.net.hosts["sentinel"], *hosted.apps, hosted.net.local)


def _cut_the_expirer_mid_batch(hosted: HostedApps) -> None:
    """Cut the expirer off from MariaDB once it has a batch in hand (``payments.expiry``:
    for all but the gate, claimed in its open transaction, which stalls holding the
    orders' rows while their buyers pay)."""
    until_batch_in_hand(hosted.expirer_metrics, patience=60)
    hosted.expirer.partition(hosted.db)


def _newest_sale(hosted: HostedApps) -> str:
    """The key of the gate's newest sale (the cell's), found on its primaries."""
    opened = []
    for host in hosted.gate_primaries():
        with redis.Redis(host=host.address, port=REDIS_GATE_PORT, socket_timeout=1,
                         decode_responses=True) as node:
            opened += [(float(node.hget(key, "opened") or 0), key)
                       for key in node.scan_iter(match="gate:{*}")]
    return max(opened)[1]


def _cut_the_gates_primary_off(hosted: HostedApps) -> None:
    """Once the replica of the primary holding the sale (the sentinel's master, or
    its Cluster shard's) has everything that primary wrote, the sale's reset
    included, cut the primary off from it and from the persister: what its scripts
    write from then on stays on it, and goes nowhere else."""
    sale = _newest_sale(hosted)
    master, replica = hosted.gate_shard(sale)
    with redis.Redis(host=master.address, port=REDIS_GATE_PORT, socket_timeout=1) as client:
        client.set(f"{sale}:nemesis", 1)  # the sale's hash tag: its shard
        client.execute_command("WAIT", 1, 1000)  # the replica has this write, and all before it
    master.partition(replica, hosted.persister)


def _fail_over_the_gate(hosted: HostedApps) -> None:
    """Once the primary cut off by ``_cut_the_gates_primary_off`` has run
    ``UNREPLICATED`` scripts (or a second passed), cut it off from everyone: the
    replica is promoted (by Sentinel, or by the Cluster's other primaries), never
    having received them. With no replica waited for, their buyers hold 201s that
    nothing will write."""
    sale = _newest_sale(hosted)
    master, _ = hosted.gate_shard(sale)
    with redis.Redis(host=master.address, port=REDIS_GATE_PORT, socket_timeout=1) as client:
        deadline = time.monotonic() + 1
        while client.xlen(f"{sale}:stream") < UNREPLICATED and time.monotonic() < deadline:
            time.sleep(0.005)
    master.partition(*(h for h in hosted.net.hosts.values() if h is not master), hosted.net.local)


def _cut_the_zookeeper_holder(hosted: HostedApps) -> None:
    """Cut app1 off from ZooKeeper and MariaDB while it holds the ZooKeeper lock:
    its session expires, its lock node goes with it, and app2's waiter takes the
    lock while app1's transaction is stalled. Watched in the hosts' ZooKeeper, where
    the holder is the lowest of the lock's sequential nodes."""
    client = KazooClient(hosts=f"{hosted.zk.address}:{ZK_PORT}", timeout=5)
    client.start(timeout=5)

    def holder() -> str | None:
        try:
            locks = client.get_children("/flashsale/locks")
            nodes = client.get_children(f"/flashsale/locks/{locks[0]}") if locks else []
        except NoNodeError:
            return None
        return min(nodes, key=lambda node: node[-10:]) if nodes else None

    try:
        held_a_while(holder)
    finally:
        client.stop()
        client.close()
    hosted.apps[0].partition(hosted.zk, hosted.db)


def _step_the_clock_under_the_holder(hosted: HostedApps) -> None:
    """Article 003: a holder is 40 ms into its critical section when the wall clock of
    the Redis that holds its lock steps forward past the lease. Redis expires the key
    by that clock, so the lock is free at once, and the next waiter takes it while
    the first holder still works: no link breaks, no process pauses."""
    client = redis.Redis(host=hosted.redis.address, port=REDIS_PORT, socket_timeout=1)
    try:
        # Someone must be asking for the lock too, or nobody takes it while the holder
        # still works and the lesson shows nothing: with a 1 s wait, every waiter may be
        # between its tries. Not this holder then, the next one (at most 5 s).
        # And the holder found must still hold the lock as the clock steps: on a loaded
        # machine the looking takes long enough for it to finish its section first,
        # and a step under nobody shows nothing.
        deadline, seen = time.monotonic() + 5, None
        while time.monotonic() < deadline:
            held_a_while(lambda: setnx_holder(client))
            holder = setnx_holder(client)
            if holder is not None and holder != seen and someone_asks(client) \
                    and setnx_holder(client) == holder:
                break
            seen = holder
        hosted.clock.step(CLOCK_STEP)
    finally:
        client.close()


def _both_halves(name: str, summary: str, act: Callable[[HostedApps], None], *, down_seconds: float,
                 environment: dict[str, str], sentinel: bool = False, clock: bool = False,
                 section_delay_ms: float = 200.0, heal_once: Callable[[HostedApps], bool] | None = None,
                 patience: float = 0.0) -> tuple[LinkFault, LinkFault]:
    """A lesson on a holder that outlives its lock: the fault as it strikes app1's
    holder inside its critical section (200 ms unless said), and its broken half
    (``-unfenced``), on instances without the stock row's fencing stamp
    (flashsale.settings.unfenced)."""
    fenced = LinkFault(name, summary, act, down_seconds=down_seconds, first_app=True,
                       section_delay_ms=section_delay_ms, environment=tuple(environment.items()),
                       sentinel=sentinel, clock=clock, heal_once=heal_once, patience=patience)
    return fenced, dataclasses.replace(fenced, name=f"{name}-unfenced", fenced=False,
                                       summary="the same, on instances without the stock row's fencing "
                                               "stamp (flashsale.settings.unfenced): the broken half")


def _with_orders_pending(fault: LinkFault) -> LinkFault:
    """The gate's failover (a replica waited for) in a sale with a payment window: the
    sale is rebuilt from MariaDB while the first wave's orders are pending, and their
    expiries and late payments come to the rebuilt sale."""
    return dataclasses.replace(fault, name=f"{fault.name}-pending", window=True,
                               summary=f"{fault.summary}; in a sale with a payment window, every order "
                                       "of the first wave pending across the rebuild, their expiries and "
                                       "late payments after it")


def _replicated_or_not(name: str, summary: str, act: Callable[[HostedApps], None], *,
                       cluster: bool = False) -> tuple[LinkFault, LinkFault]:
    """A lesson on the gate's replicas: the fault with each purchase waiting for one
    replica (``FLASHSALE_GATE_REPLICAS=1``), and its broken half (``-unreplicated``),
    with none waited for: the 201s the replica never received are lost, as designed."""
    waited = LinkFault(name, f"{summary}; each purchase waits for 1 replica", act, down_seconds=GATE_FAILOVER,
                       gate_replicas=1, trigger=0, gate_cluster=cluster, before=_cut_the_gates_primary_off,
                       heal_once=lambda hosted: bool(promoted(hosted, cluster)), patience=GATE_PATIENCE)
    return waited, dataclasses.replace(waited, name=f"{name}-unreplicated", gate_replicas=0,
                                       summary=f"{summary}; no replica waited for: the broken half")


_GATE_FAILOVER = _replicated_or_not(
    "failover-gate-redis", "the gate's Redis master cut off from its replica and the persister (what it runs "
    "stays on it), then from everyone for 6 s, or until its replica is promoted (12 s at most): Sentinel "
    "promotes the replica, the sale pauses until reconciled with MariaDB, and the old master comes back as "
    "a replica", _fail_over_the_gate)
_GATE_SHARD_FAILOVER = _replicated_or_not(
    "failover-gate-shard", "the gate's Redis a Cluster of three primaries with a replica each; the primary "
    "of the sale's shard cut off from its replica and the persister (what it runs stays on it), then from "
    "everyone for 6 s, or until its replica is promoted (12 s at most): the other primaries vote its "
    "replica in, the sale pauses until reconciled with MariaDB, and the old primary comes back as a "
    "replica", _fail_over_the_gate, cluster=True)

LINK_FAULTS: dict[str, LinkFault] = {
    fault.name: fault
    for fault in (
        LinkFault("partition-app-db", "app1 cut off from MariaDB both ways for 6 s: its open transactions "
                  "stall holding their row locks while its Redis lease runs out",
                  lambda h: h.apps[0].partition(h.db)),
        LinkFault("partition-app-redis", "app1 cut off from Redis both ways for 6 s: a lock it holds "
                  "expires under it; it can neither take nor release one",
                  lambda h: h.apps[0].partition(h.redis)),
        LinkFault("loss-app-db", "30 % of the packets between app1 and MariaDB dropped, each way, for 6 s",
                  lambda h: h.apps[0].lose(h.db, 30)),
        LinkFault("partition-buyers-app", "the buyers cut off from app1 for 6 s: purchases it took are "
                  "answered into the void; their buyers time out and retry",
                  lambda h: h.apps[0].partition(h.net.local)),
        *_both_halves("partition-holder-db", "app1, holding the setnx lock (2 s lease) 40 ms into a "
                      "200 ms critical section, cut off from MariaDB for 2.5 s: its lease runs out, app2 "
                      "takes the lock, and app1's stalled write lands after",
                      _cut_the_holder, down_seconds=PAST_A_2_S_LEASE, environment=LEASE_LESSON),
        LinkFault("partition-holder-zk", "app1, holding the ZooKeeper lock 40 ms into a 200 ms critical "
                  "section, cut off from ZooKeeper and MariaDB for 5 s: its 4 s session expires, app2 "
                  "takes the lock, and app1 must not commit what it started",
                  _cut_the_zookeeper_holder, down_seconds=PAST_THE_SESSION, first_app=True,
                  section_delay_ms=200.0, environment=tuple(LEASE_LESSON.items())),
        *_both_halves("failover-redis-holder", "app1 takes the setnx lock on a master cut off from its "
                      "replica, then the master is cut off from everyone (app1 from MariaDB too) for 8 s, "
                      "or until Sentinel has promoted the replica (12 s at most): the lock is free there, "
                      "and app2 takes it",
                      _fail_over_under_the_holder, down_seconds=THROUGH_A_FAILOVER,
                      environment=FAILOVER_LESSON, sentinel=True, section_delay_ms=FAILOVER_SECTION_MS,
                      heal_once=lock_failed_over, patience=FAILOVER_PATIENCE),
        *_both_halves("clock-jump-redis", "the locks' Redis's wall clock steps 5 s forward while a "
                      "holder of the setnx lock (2 s lease) is 40 ms into a 500 ms critical section: "
                      "Redis expires the key at once, and the next waiter takes the lock",
                      _step_the_clock_under_the_holder, down_seconds=2.0, environment=LEASE_LESSON,
                      clock=True, section_delay_ms=CLOCK_JUMP_SECTION_MS),
        *_GATE_FAILOVER,
        *_GATE_SHARD_FAILOVER,
        _with_orders_pending(_GATE_FAILOVER[0]),
        _with_orders_pending(_GATE_SHARD_FAILOVER[0]),
        LinkFault("partition-persister-db", "the gate's persister cut off from MariaDB for 6 s: the gate "
                  "keeps selling from Redis, the orders wait in its stream, a batch in flight may or "
                  "may not have committed", lambda h: h.persister.partition(h.db)),
        LinkFault("partition-expirer-db", "in a sale with a payment window, the expirer cut off from "
                  "MariaDB for 6 s with a batch in hand, while buyers pay and buy: a lock strategy's or "
                  "atomic's open transaction stalls holding the claimed orders' rows (a Redis stock "
                  "lock's lease runs out under it); the gate's batch has committed, its units owed to "
                  "Redis, and its next pass stalls", _cut_the_expirer_mid_batch, window=True),
        LinkFault("slow-app", "app1's link shaped to 64 kbit/s (tbf) for 6 s: every byte it sends "
                  "queues", lambda h: h.apps[0].slow(64)),
    )
}
