"""The logical expiry's reads on the real Redis, where many readers meet no entry at
once: a cold cache, and a Redis that cannot be reached. Either way one load serves
them (a process's, when nothing is shared), not one load per reader."""

import threading
import time
import uuid

import pytest
from django.test import override_settings

from common.testing import run_at_once
from inventory.readcache import LogicalExpiry
from stack.scratch import free_port

pytestmark = pytest.mark.server  # the suite's Redis

READERS = 16
RUN = uuid.uuid4().hex  # each run's keys its own: the suite's Redis is not cleared for these


def fresh_key(name: str) -> str:
    return f"test-readcache:{RUN}:{name}"


def counted(seconds: float = 0.1):
    """A load of ``seconds`` that counts its calls, as an audit would take its time."""
    loads = []
    lock = threading.Lock()

    def load(name: str) -> str:
        time.sleep(seconds)
        with lock:
            loads.append(name)
            return f"{name} #{len(loads)}"

    return load, loads


def crowd(cached: LogicalExpiry, name: str) -> list[str]:
    answers = []
    errors = run_at_once(lambda i: answers.append(cached.get(name)), READERS)
    assert errors == [None] * READERS, errors
    return answers


def test_a_cold_entry_is_loaded_once_and_its_other_readers_wait_for_it():
    load, loads = counted()
    cached = LogicalExpiry(load=load, key=lambda name: fresh_key("test-cold:" + name), fresh_s=lambda: 5.0)
    answers = crowd(cached, "sku-1")
    assert loads == ["sku-1"] and set(answers) == {"sku-1 #1"}


def test_a_cold_entry_whose_loader_is_slow_past_the_wait_is_loaded_by_its_readers_once_a_process():
    load, loads = counted(seconds=0.3)
    cached = LogicalExpiry(load=load, key=lambda name: fresh_key("test-slow:" + name), fresh_s=lambda: 5.0,
                           cold_wait_s=0.05)
    answers = crowd(cached, "sku-1")
    assert len(answers) == READERS
    assert len(loads) == 2  # the claimer's, and one for all who gave up waiting


def test_with_redis_unreachable_a_process_loads_once_a_period_for_all_its_readers():
    load, loads = counted()
    nowhere = {"default": {"BACKEND": "django_redis.cache.RedisCache",
                           "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
                           "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2}}}
    cached = LogicalExpiry(load=load, key=lambda name: fresh_key("test-away:" + name), fresh_s=lambda: 2.0)
    with override_settings(CACHES=nowhere):
        first = crowd(cached, "sku-1")
        again = crowd(cached, "sku-1")
        time.sleep(2.05)  # past the period: loaded again, once
        later = crowd(cached, "sku-1")
    assert set(first) == set(again) == {"sku-1 #1"} and set(later) == {"sku-1 #2"}
    assert loads == ["sku-1", "sku-1"]
