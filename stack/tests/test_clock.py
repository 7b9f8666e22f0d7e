"""A stepped wall clock on a real Redis (``stack.clock``): keys expire by Redis's
own clock, so a step past a key's TTL ends it at once, and only the wall clock
moves."""

import os
import subprocess
import time

import pytest
import redis

from stack.clock import SteppedClock

pytestmark = pytest.mark.server  # it starts servers of its own

PORT = 7392


@pytest.fixture
def stepped(tmp_path):
    clock = SteppedClock(tmp_path)
    process = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(PORT), "--save", "",
                                "--appendonly", "no"], env={**os.environ, **clock.environment()},
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    client = redis.Redis(port=PORT, socket_timeout=2)
    try:
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        yield clock, client
    finally:
        client.close()
        process.terminate()
        process.wait(10)


def test_a_step_past_a_ttl_expires_the_key_at_once(stepped):
    clock, client = stepped
    client.set("lease", "holder", px=2000)
    client.set("flag", "kept", ex=3600)
    before = client.time()[0]
    clock.step(5)
    assert client.get("lease") is None  # its 2 s were up the moment the clock moved
    assert client.get("flag") == b"kept"
    assert client.pttl("flag") < 3_596_000  # the step spent 5 s of its hour too
    assert client.time()[0] - before >= 5


def test_steps_add_up_and_go_forward_only(tmp_path):
    clock = SteppedClock(tmp_path)
    clock.step(5)
    clock.step(2.5)
    assert clock.offset == 7.5 and clock.file.read_text() == "+7.5\n"
    with pytest.raises(ValueError):
        clock.step(0)
