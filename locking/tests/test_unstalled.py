"""The watchdog tests' premise check: a try is discounted only when a real server was
seen to stand still through it (a scratch Redis, stopped with SIGSTOP), never when
it failed on a running machine."""

import signal
import time

import pytest

from stack.scratch import start_redis

from .conftest import STALL_S, run_unstalled

pytestmark = pytest.mark.system  # a redis-server of its own


@pytest.fixture
def scratch():
    server = start_redis()
    yield server
    server.process.send_signal(signal.SIGCONT)
    server.stop()


def stand_still(server, seconds: float) -> None:
    server.process.send_signal(signal.SIGSTOP)
    time.sleep(seconds)
    server.process.send_signal(signal.SIGCONT)


def test_a_failure_on_a_running_machine_fails_at_once(scratch):
    tries = []

    def attempt(name):
        tries.append(name)
        raise AssertionError("the lock was lost")

    with pytest.raises(AssertionError, match="the lock was lost"):
        run_unstalled(scratch.url, attempt)
    assert tries == ["watched-0"]


def test_a_try_the_server_stood_still_through_is_tried_again(scratch):
    tries = []

    def attempt(name):
        tries.append(name)
        if len(tries) == 1:
            stand_still(scratch, 2 * STALL_S)
            raise AssertionError("lost while the machine stood still")

    run_unstalled(scratch.url, attempt)
    assert tries == ["watched-0", "watched-1"]


def test_every_try_stalled_fails_and_says_so(scratch):
    def attempt(name):
        stand_still(scratch, 2 * STALL_S)
        raise AssertionError("lost")

    with pytest.raises(pytest.fail.Exception, match="stood still in every try"):
        run_unstalled(scratch.url, attempt, tries=2)
