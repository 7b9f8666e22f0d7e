"""Verdicts from recorded histories on real servers: a small run of the matrix
(``make verdicts`` runs it all), on app instances on test hosts of their own whose
link to MariaDB is cut mid-sale (``partition-app-db``). ``none`` must be caught by
the checker, with the window where no order gets past; ``setnx`` must be
linearizable, every try and the final read in its history."""

import contextlib
from collections import Counter

import pytest

from chaos.sale import BUYER_PREFIX
from common.history import UNKNOWN, Final, Purchase, read
from stack.hosted import HostedApps
from stack.servers import mariadb_app_connection
from verdicts.checker import check
from verdicts.holders import promoted
from verdicts.links import (
    CLOCK_JUMP_SECTION_MS,
    CLOCK_STEP,
    FAILOVER_LESSON,
    FAILOVER_SECTION_MS,
    LEASE_LESSON,
)
from verdicts.matrix import EXPIRY_PAUSE_MS, run_cell
from verdicts.timeline import svg

pytestmark = [pytest.mark.e2e, pytest.mark.hosted]

SMALL = dict(stock=30, buyers=240, threads=12, trigger=10)


@pytest.fixture(scope="module")
def hosts(stack_config):
    with HostedApps(stack_config, section_delay_ms=2.0, gate=True) as hosted:
        yield hosted


def test_none_under_a_partition_is_not_linearizable(stack_config, hosts, tmp_path):
    cell = run_cell(stack_config, strategy="none", nemesis="partition-app-db", out=tmp_path, on=hosts,
                    **SMALL)
    assert cell.end_state.injected
    (sku,) = cell.verdict.skus
    assert sku.linearizable is False, cell.verdict
    window = sku.window
    assert window.stuck in window.ops and len(window.ops) >= 2  # an answer, and what it overlaps
    drawn = svg(window)
    assert window.stuck.key[:10] in drawn and drawn.count("#c62828") == 1  # the stuck answer, in red
    # The history file says the same to anyone who checks it again.
    assert check(read(cell.history)).valid is False


def test_a_correct_strategy_under_the_same_partition_is_linearizable(stack_config, hosts, tmp_path):
    cell = run_cell(stack_config, strategy="setnx", nemesis="partition-app-db", out=tmp_path, on=hosts,
                    **SMALL)
    assert cell.end_state.injected and cell.end_state.orders == SMALL["stock"]
    assert cell.verdict.valid is True, cell.verdict.anomalies
    events = read(cell.history)
    # Every try is in the history, each completed after it was invoked, and the final
    # read closes it.
    purchases = [e for e in events if isinstance(e, Purchase)]
    assert len(purchases) >= SMALL["buyers"] and all(p.complete >= p.invoke for p in purchases)
    assert sum(p.outcome == UNKNOWN for p in purchases) == cell.unknown
    assert isinstance(events[-1], Final) and events[-1].remaining == 0
    assert sorted(order for _, order in events[-1].orders) == sorted(
        p.order_id for p in purchases if p.outcome == "ok" and not p.replayed)


# The lesson on leases (article 003): app1 holds the setnx lock when it is cut off from
# MariaDB past its lease; app2 takes the lock. Both halves run the same sale.
LEASE = dict(stock=20, buyers=120, threads=12, trigger=5)
# The failover's section outlasts the lesson's lock wait, so most waiters give up
# (five tries, each a wait in vain), the more so the slower the machine: buyers enough
# that the sale still ends sold out there. Those left over are told sold_out at once.
THROUGH_THE_FAILOVER = {**LEASE, "buyers": 480}


def judged_as_its_half(cell, fenced: bool, *, broken: str) -> None:
    """A lesson's half, once the fault struck: the fenced one linearizable, selling
    the stock exactly; the unfenced one not, as designed, its audit's ``broken``
    figure above 0."""
    assert cell.end_state.injected
    assert cell.verdict.valid is fenced, cell.verdict.anomalies[:1]
    if fenced:
        assert cell.end_state.orders == LEASE["stock"]
    else:
        assert cell.linearizable == "**no**, as designed" and getattr(cell.end_state, broken) > 0


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "unfenced"])
def test_a_holder_cut_off_past_its_lease_is_safe_only_with_the_fencing_stamp(stack_config, tmp_path, fenced):
    nemesis = "partition-holder-db" if fenced else "partition-holder-db-unfenced"
    with HostedApps(stack_config, section_delay_ms=200.0, fenced=fenced, environment=LEASE_LESSON) as hosted:
        cell = run_cell(stack_config, strategy="setnx", nemesis=nemesis, out=tmp_path, on=hosted, **LEASE)
    judged_as_its_half(cell, fenced, broken="lost_updates")


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "unfenced"])
def test_a_failover_under_the_holder_is_safe_only_with_the_fencing_stamp(stack_config, tmp_path, fenced):
    """Articles 000 and 003 on a real replica and Sentinel: the lock app1 took never
    reached the replica Sentinel promotes, and app2 takes it there."""
    nemesis = "failover-redis-holder" if fenced else "failover-redis-holder-unfenced"
    with HostedApps(stack_config, section_delay_ms=FAILOVER_SECTION_MS, fenced=fenced,
                    environment=FAILOVER_LESSON, sentinel=True) as hosted:
        assert hosted.master() is hosted.redis
        cell = run_cell(stack_config, strategy="setnx", nemesis=nemesis, out=tmp_path, on=hosted,
                        **THROUGH_THE_FAILOVER)
        # The cut came (if not, the output says why it could not strike), and Sentinel
        # failed over (if not, its log says where it stopped).
        assert cell.end_state.injected
        assert hosted.master() is hosted.net.hosts["redis2"], hosted.log_tail("sentinel")
    judged_as_its_half(cell, fenced, broken="oversold")


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "unfenced"])
def test_a_clock_jump_under_the_holder_is_safe_only_with_the_fencing_stamp(stack_config, tmp_path, fenced):
    """Article 003's clock jump: the locks' Redis's wall clock steps past the lease while
    a holder works; the key expires under it and the next waiter takes the lock."""
    nemesis = "clock-jump-redis" if fenced else "clock-jump-redis-unfenced"
    with HostedApps(stack_config, section_delay_ms=CLOCK_JUMP_SECTION_MS, fenced=fenced,
                    environment=LEASE_LESSON, clock=True) as hosted:
        cell = run_cell(stack_config, strategy="setnx", nemesis=nemesis, out=tmp_path, on=hosted, **LEASE)
        assert hosted.clock.offset == CLOCK_STEP  # stepped once, when it struck
    judged_as_its_half(cell, fenced, broken="lost_updates")


def test_a_zookeeper_holder_cut_off_past_its_session_leaves_the_lock_to_the_next(stack_config, tmp_path):
    """The session is ZooKeeper's lease: app1 cut off past it loses the lock to app2,
    and must not commit what it started. The sale goes on to the last unit (a node
    left behind by a waiter cut off mid-wait once stopped it for good)."""
    with HostedApps(stack_config, section_delay_ms=200.0, environment=LEASE_LESSON, zookeeper=True) as hosted:
        cell = run_cell(stack_config, strategy="zookeeper", nemesis="partition-holder-zk", out=tmp_path,
                        on=hosted, **LEASE)
    assert cell.end_state.injected
    assert cell.verdict.valid is True, cell.verdict.anomalies[:1]
    assert cell.end_state.orders == LEASE["stock"]


def test_the_gate_with_its_persister_cut_off_from_mariadb_writes_every_sale(stack_config, hosts, tmp_path):
    cell = run_cell(stack_config, strategy="gate", nemesis="partition-persister-db", out=tmp_path, on=hosts,
                    **SMALL)
    assert cell.end_state.injected
    assert cell.verdict.valid is True, cell.verdict.anomalies[:1]
    assert cell.end_state.orders == SMALL["stock"]


@pytest.mark.parametrize("replicas", [1, 0], ids=["one-replica-waited", "unreplicated"])
@pytest.mark.parametrize("cluster", [False, True], ids=["sentinel", "cluster"])
def test_a_failover_of_the_gates_redis_takes_back_a_201_only_without_a_replica_waited_for(
        stack_config, tmp_path, replicas, cluster):
    """The gate's Redis with a replica, behind Sentinel or a Cluster shard: the primary
    holding the sale runs scripts its replica never receives, then is cut off, and the
    replica is promoted. The sale pauses until it is reconciled with MariaDB, so no
    unit is sold twice either way; only a purchase that waited for the replica keeps
    every 201 true."""
    nemesis = "failover-gate-shard" if cluster else "failover-gate-redis"
    nemesis += "" if replicas else "-unreplicated"
    with HostedApps(stack_config, gate_replicas=replicas, gate_cluster=cluster) as hosted:
        assert promoted(hosted, cluster) == []
        cell = run_cell(stack_config, strategy="gate", nemesis=nemesis, out=tmp_path, on=hosted, **SMALL)
        assert len(promoted(hosted, cluster)) == 1  # one primary's replica took over
    assert cell.end_state.injected and cell.end_state.oversold == 0
    if replicas:
        assert cell.verdict.valid is True, cell.verdict.anomalies[:1]
        assert cell.end_state.lies == 0 and cell.end_state.orders == SMALL["stock"]
    else:
        assert cell.linearizable == "**no**, as designed" and cell.end_state.lies > 0  # 201s lost


def test_signed_in_buyers_sell_the_stock_exactly_and_each_answer_holds(stack_config, tmp_path):
    """The instances take the buyer from credentials (FLASHSALE_BUYER_AUTH): each of the
    sale's buyers is an account with its bearer token, made by ``manage.py buyers_make``
    in the instances' database."""
    signed_in = {"FLASHSALE_BUYER_AUTH": "true"}
    with HostedApps(stack_config, section_delay_ms=2.0, environment=signed_in) as hosted:
        cell = run_cell(stack_config, strategy="atomic", nemesis="partition-app-db", out=tmp_path, on=hosted,
                        **SMALL)
        with contextlib.closing(mariadb_app_connection(stack_config, database=hosted.database)) as db:
            cursor = db.cursor()
            cursor.execute("SELECT COUNT(*) FROM auth_user WHERE username LIKE %s", (f"{BUYER_PREFIX}%",))
            (accounts,) = cursor.fetchone()
            cursor.execute("SELECT COUNT(*) FROM orders_order "
                           "WHERE user_id NOT IN (SELECT username FROM auth_user)")
            (by_nobody,) = cursor.fetchone()
    assert accounts == SMALL["buyers"] and by_nobody == 0
    assert cell.end_state.injected
    assert cell.verdict.valid is True, cell.verdict.anomalies[:1]
    assert cell.end_state.orders == SMALL["stock"]
    assert cell.end_state.lies == 0 and cell.end_state.replays_wrong == 0


@pytest.mark.parametrize("strategy", ["setnx", "gate"])
def test_an_expirer_cut_off_from_mariadb_mid_batch_returns_each_unit_once(stack_config, tmp_path, strategy):
    """The expirer's batch stalls in its open transaction, holding the orders' rows (and,
    under setnx, the stock lock, whose lease runs out) while buyers pay them."""
    window = dict(stock=20, buyers=120, threads=12, trigger=5)
    with HostedApps(stack_config, section_delay_ms=2.0, payments=True,
                    expiry_pause_ms=EXPIRY_PAUSE_MS, gate=strategy == "gate") as hosted:
        cell = run_cell(stack_config, strategy=strategy, nemesis="partition-expirer-db", out=tmp_path,
                        on=hosted, **window)
    assert cell.end_state.injected, cell.end_state.notes
    assert cell.verdict.valid is True, cell.verdict.anomalies[:1]
    final = read(cell.history)[-1]
    statuses = Counter(status for _, _, status in final.orders)
    # Units came back and sold again, payments landed, and nothing is left pending.
    assert statuses["expired"] >= 1 and statuses["paid"] >= 1, statuses
    assert len(final.orders) > window["stock"] and "pending" not in statuses
    # Every unit is left or held by one paid order: none returned twice, none lost.
    assert statuses["paid"] + final.remaining == window["stock"]
    assert cell.end_state.broken == [], cell.end_state.notes
