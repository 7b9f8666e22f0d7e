"""A stepped wall clock on a real Redis (``stack.clock``): keys expire by Redis's
own clock, so a step past a key's TTL ends it at once, and only the wall clock
moves."""

import pytest

from stack.clock import SteppedClock
from stack.scratch import start_redis

pytestmark = pytest.mark.server  # it starts servers of its own


@pytest.fixture
def stepped(tmp_path):
    clock = SteppedClock(tmp_path)
    server = start_redis(environment=clock.environment())
    client = server.client()
    try:
        yield clock, client
    finally:
        client.close()
        server.stop()


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
