"""Every distributed lock, the same test: threads in several processes increment a
Redis counter as GET, pause, SET under the lock; without mutual exclusion increments
are lost (the ``none`` of a counter)."""

import pytest
from django.conf import settings

from .workers import FORKED, increment_under_lock

PROCESSES, THREADS, ROUNDS = 4, 3, 20


@pytest.fixture(params=["setnx", "redisson", "redisson-fair", "redisson-rw", "zookeeper"])
def kind_and_options(request, redis_url, key_prefix, zk_root):
    if request.param == "zookeeper":
        return request.param, {"hosts": settings.ZOOKEEPER_HOSTS, "root": zk_root}
    return request.param, {"url": redis_url, "key_prefix": key_prefix}


def test_threads_and_processes_lose_no_increment(kind_and_options, redis_url, key_prefix, redis_client):
    kind, options = kind_and_options
    counter = f"{key_prefix}value"  # the lock itself is named "counter"
    others = [FORKED.Process(target=increment_under_lock,
                             args=(kind, options, redis_url, counter, THREADS, ROUNDS))
              for _ in range(PROCESSES - 1)]
    for p in others:
        p.start()
    increment_under_lock(kind, options, redis_url, counter, THREADS, ROUNDS)
    for p in others:
        p.join()
    assert [p.exitcode for p in others] == [0] * (PROCESSES - 1)
    assert int(redis_client.get(counter)) == PROCESSES * THREADS * ROUNDS
