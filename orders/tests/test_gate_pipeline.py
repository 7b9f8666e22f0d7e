"""The gate's scripts sent together (``orders/gate/pipeline.py``), on a real Redis of
the module's own (stack.scratch): ``CLIENT PAUSE``, a script that spins a second and
``SCRIPT FLUSH`` hold or empty a whole server, which the stack's tests share.

The batches are made deterministic with ``CLIENT PAUSE``: Redis holds the first
purchase's script unanswered while the others come, so they wait and go out as the
next batch, in the order they came.
"""

import signal
import threading
import time

import pytest
import redis
from django.conf import settings
from django.test import override_settings
from redis.backoff import NoBackoff
from redis.retry import Retry

from common.gateredis import unreachable
from common.testing import wait_until
from orders.gate.pipeline import ScriptPipeline
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.selectors import sale_audit
from orders.tests.test_gate import persist
from stack.scratch import redis_servers, replica_in_step, start_redis

# Its backends are asked for by name (getfixturevalue): conftest.py cannot see them.
pytestmark = pytest.mark.server

# Counts its runs in KEYS[1]; ARGV[1] > 0: first spins that many ms (a slow script:
# the client's read of its reply times out, while Redis runs it to the end); < 0: an
# error reply instead.
COUNTING = """
local spin = tonumber(ARGV[1])
if spin < 0 then return redis.error_reply('refused: ' .. ARGV[2]) end
if spin > 0 then
  local t = redis.call('TIME')
  local until_us = (t[1] * 1000000 + t[2]) + spin * 1000
  repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= until_us
end
return {ARGV[2], redis.call('INCR', KEYS[1])}
"""
COUNTER = "test:pipeline:runs"
HELD_MS = 10_000  # the most Redis holds the first batch while the others come


@pytest.fixture(scope="module")
def scratch_gate():
    with redis_servers(1) as (server,):
        yield server


@pytest.fixture(autouse=True)
def _the_gate_on_its_own_redis(scratch_gate):
    with override_settings(FLASHSALE_GATE_REDIS_URL=scratch_gate.url):
        yield


@pytest.fixture
def gate_client():
    client = redis.Redis.from_url(settings.FLASHSALE_GATE_REDIS_URL, decode_responses=True, socket_timeout=2)
    client.delete(COUNTER)
    client.script_load(COUNTING)  # as the gate's own script is, once the first purchase ran
    yield client
    client.delete(COUNTER)
    client.close()


def run_together(pipeline: ScriptPipeline, calls: list[tuple[int, str]], *, pause: redis.Redis) -> list:
    """Each call (spin ms, name) from a thread of its own, started in order while
    Redis holds every script (``CLIENT PAUSE WRITE``): the first goes alone, the rest
    wait in the pipeline, in order, and go together once it is answered. Redis lets go
    once they all wait, however long starting them took. Each thread's reply, or the
    error it raised."""
    results: list = [None] * len(calls)

    def one(i: int) -> None:
        spin, name = calls[i]
        try:
            results[i] = pipeline.run([COUNTER], [spin, name]).value
        except Exception as e:  # noqa: BLE001 - the test reads each thread's error
            results[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(calls))]
    pause.execute_command("CLIENT", "PAUSE", HELD_MS, "WRITE")  # EVALSHA and SCRIPT FLUSH are writes
    try:
        for i, thread in enumerate(threads):
            thread.start()
            # The first: out (nothing left waiting); each later one: in line behind it.
            deadline = time.monotonic() + HELD_MS / 1000
            while not (pipeline._out and len(pipeline._waiting) == i) and time.monotonic() < deadline:
                time.sleep(0.001)
    finally:
        pause.execute_command("CLIENT", "UNPAUSE")
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads), "a purchase was left waiting"
    return results


def test_purchases_that_come_while_a_batch_is_out_go_together_each_with_its_own_reply(gate_client):
    sizes: list[int] = []
    pipeline = ScriptPipeline(gate_client.register_script(COUNTING), sent=sizes.append)
    names = [f"p{i}" for i in range(9)]
    results = run_together(pipeline, [(0, name) for name in names], pause=gate_client)
    assert sizes == [1, 8]  # the first alone (held by the pause), then everyone who came meanwhile
    assert [reply[0] for reply in results] == names  # each its own reply
    assert sorted(reply[1] for reply in results) == list(range(1, 10))  # each ran once
    assert results[0][1] == 1 and [reply[1] for reply in results[1:]] == list(range(2, 10))  # in order
    assert pipeline.run([COUNTER], [0, "alone"]).value == ["alone", 10] and sizes[-1] == 1


def test_an_error_reply_is_its_purchases_alone_and_the_replies_after_it_are_read(gate_client):
    pipeline = ScriptPipeline(gate_client.register_script(COUNTING))
    calls = [(0, "first"), (0, "before"), (-1, "bad"), (0, "after")]
    results = run_together(pipeline, calls, pause=gate_client)
    assert results[0] == ["first", 1] and results[1] == ["before", 2] and results[3] == ["after", 3]
    assert isinstance(results[2], redis.ResponseError) and "refused: bad" in str(results[2])


def test_replies_lost_mid_batch_are_unknown_and_their_scripts_may_have_run(gate_client):
    client = redis.Redis.from_url(settings.FLASHSALE_GATE_REDIS_URL, decode_responses=True,
                                  socket_timeout=0.6)
    pipeline = ScriptPipeline(client.register_script(COUNTING))
    # The second batch holds a script slower than the client's read timeout.
    calls = [(0, "first"), (0, "fast"), (1000, "slow"), (0, "after")]
    results = run_together(pipeline, calls, pause=gate_client)
    assert results[0] == ["first", 1]
    for lost in results[1:]:
        assert isinstance(lost, redis.TimeoutError) and not unreachable(lost), lost  # "outcome unknown"
    # And each of them did run, once the slow one is done: "unknown" was the truth.
    wait_until(lambda: gate_client.get(COUNTER) == "4", timeout=30, what="all four scripts run")
    assert pipeline.run([COUNTER], [0, "next"]).value == ["next", 5]  # a new connection for the next batch
    client.close()


def test_when_redis_cannot_be_reached_every_purchase_is_told_nothing_was_sent():
    with socket_free() as port:
        client = redis.Redis(port=port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))  # the gate's
        pipeline = ScriptPipeline(client.register_script(COUNTING))
        errors = []

        def one() -> None:
            with pytest.raises(redis.ConnectionError) as caught:
                pipeline.run([COUNTER], [0, "x"])
            errors.append(caught.value)

        threads = [threading.Thread(target=one) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    assert len(errors) == 6 and all(unreachable(e) for e in errors)  # "unavailable": none ran


def test_a_batch_redis_does_not_know_the_script_of_is_loaded_and_sent_again_once(gate_client):
    sizes: list[int] = []
    flusher = redis.Redis.from_url(settings.FLASHSALE_GATE_REDIS_URL)

    def sent(size: int) -> None:
        sizes.append(size)
        if len(sizes) == 2:
            # Forgotten (as by a restart without persistence) after the first batch ran,
            # before the second is sent: told of a batch, the pipeline has not sent the next.
            flusher.script_flush()

    pipeline = ScriptPipeline(gate_client.register_script(COUNTING), sent=sent)
    assert pipeline.run([COUNTER], [0, "known"]).value == ["known", 1]
    results = run_together(pipeline, [(0, f"p{i}") for i in range(5)], pause=gate_client)
    flusher.close()
    assert [reply[0] for reply in results] == [f"p{i}" for i in range(5)]
    assert sizes == [1, 1, 4, 4]  # the second batch refused whole, then sent again once loaded
    assert gate_client.get(COUNTER) == "6"  # each ran once: a NOSCRIPT reply ran nothing


@pytest.mark.django_db
@pytest.mark.parametrize("together", [True, False], ids=["pipeline", "alone"])
def test_concurrent_gate_purchases_sell_the_stock_exactly_either_way(together):
    with override_settings(FLASHSALE_STRATEGY="gate", FLASHSALE_GATE_PIPELINE=together):
        sale_reset(sku="sku-p", stock=30)
        outcomes: list[str] = []

        def buyer(i: int) -> None:
            for n in range(5):
                try:
                    outcomes.append(order_create(sku="sku-p", quantity=1, user_id=f"u{i}",
                                                 idempotency_key=f"k{i}-{n}").status)
                except Exception as e:  # noqa: BLE001 - sold out, counted below
                    outcomes.append(type(e).__name__)

        threads = [threading.Thread(target=buyer, args=(i,)) for i in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert outcomes.count("accepted") == 30 and outcomes.count("SoldOut") == 30
        persist()
        audit = sale_audit(sku="sku-p")
        assert audit.consistent and audit.ordered_quantity == 30


class socket_free:
    """A loopback port nothing listens on, held bound (not listening) meanwhile."""

    def __enter__(self) -> int:
        import socket

        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        return self._socket.getsockname()[1]

    def __exit__(self, *exc) -> None:
        self._socket.close()


def test_a_batch_sent_again_after_noscript_is_vouched_for_only_by_its_own_wait():
    """The first WAIT of a batch Redis refused (NOSCRIPT) counted writes that did not
    include the scripts sent again after it: if the second WAIT's reply is lost, the
    purchases' replicas are unknown, never the first count."""
    with redis_servers(1) as (primary,):
        replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
        try:
            wait_until(lambda: replica_in_step(primary.client()), 10, what="the replica in step")
            client = redis.Redis.from_url(primary.url, decode_responses=True, socket_timeout=5)
            script = client.register_script(COUNTING)
            script_load = client.script_load  # not loaded: the first batch meets NOSCRIPT

            def loaded_then_replica_stops(source):
                sha = script_load(source)
                replica.process.send_signal(signal.SIGSTOP)  # the second WAIT blocks...
                threading.Thread(target=_kill_the_waiting_client, args=(primary.client(),)).start()
                return sha  # ...and its connection is killed meanwhile: the WAIT's reply is lost

            client.script_load = loaded_then_replica_stops
            pipeline = ScriptPipeline(script, wait=lambda: (1, 5000))
            replied = pipeline.run([COUNTER], [0, "p"])
            assert replied.value == ["p", 1] and replied.replicas is None
        finally:
            replica.process.send_signal(signal.SIGCONT)
            replica.stop()


def _kill_the_waiting_client(server: redis.Redis) -> None:
    """Kill the connection that is blocked in WAIT, once there is one. Blocked (flag
    ``b``), not only last seen in WAIT: the batch's connection is idle after its first
    WAIT until it sends again, and a busy machine could let this thread kill it then."""
    def blocked() -> list[dict]:
        return [c for c in server.client_list() if c["cmd"] == "wait" and "b" in c["flags"]]

    wait_until(blocked, 5, what="a client blocked in WAIT")
    for c in blocked():
        server.client_kill_filter(_id=c["id"])
