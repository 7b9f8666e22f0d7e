"""A link fault answers what a sale asks of any fault (``chaos.faults.Fault``), and
heals once what its lesson needs has happened."""

import dataclasses
import time
from types import SimpleNamespace

import redis

from chaos.faults import FAULTS, Fault
from stack.hosted_redis import SENTINEL_SERVICE
from verdicts.holders import lock_failed_over
from verdicts.links import LINK_FAULTS


def test_a_link_fault_has_every_attribute_a_sale_reads_of_a_fault():
    asked = {f.name for f in dataclasses.fields(Fault)} - {"name", "summary", "down_seconds"}
    for fault in LINK_FAULTS.values():
        assert all(hasattr(fault, name) for name in asked), fault.name
        assert fault.for_sale(None) is fault
    assert all(isinstance(fault, Fault) for fault in FAULTS.values())


class _Host:
    def __init__(self) -> None:
        self.healed = 0

    def heal(self) -> None:
        self.healed += 1


class _Hosted:
    """What a link fault's heal touches of its hosts: each host's heal."""

    def __init__(self) -> None:
        self.net = SimpleNamespace(hosts={"redis": _Host(), "app1": _Host()})


def _healing(until, patience):
    """The failover lesson's heal with ``until`` and ``patience``: its hosts, and how long it took."""
    hosted = _Hosted()
    fault = dataclasses.replace(LINK_FAULTS["failover-redis-holder"], heal_once=until, patience=patience)
    started = time.monotonic()
    fault.on(hosted).heal(None, [])
    return hosted, time.monotonic() - started


def test_a_heal_waits_for_what_the_lesson_needs_to_have_happened():
    asked = []

    def promoted_at_the_third_look(hosted) -> bool:
        asked.append(hosted)
        return len(asked) == 3

    hosted, took = _healing(promoted_at_the_third_look, patience=30)
    assert len(asked) == 3 and took < 30
    assert all(host.healed == 1 for host in hosted.net.hosts.values())


def test_a_heal_comes_after_its_patience_even_if_that_never_happens():
    hosted, took = _healing(lambda hosted: False, patience=0.3)
    assert took >= 0.3
    assert all(host.healed == 1 for host in hosted.net.hosts.values())


def test_the_failovers_heal_only_once_the_replica_is_promoted():
    for name in ("failover-redis-holder", "failover-redis-holder-unfenced"):
        assert LINK_FAULTS[name].heal_once is lock_failed_over and LINK_FAULTS[name].patience > 0
    gates = [fault for name, fault in LINK_FAULTS.items() if name.startswith("failover-gate-")]
    assert len(gates) == 6 and all(fault.heal_once is not None and fault.patience > 0 for fault in gates)


def test_a_sentinel_that_does_not_answer_has_not_failed_over():
    class Unanswered:
        def master(self, service: str = SENTINEL_SERVICE):
            raise redis.TimeoutError("Timeout reading from socket")

    assert lock_failed_over(Unanswered()) is False
