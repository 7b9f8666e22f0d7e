"""The lessons' looks at who holds the lock see nobody when the Redis does not answer
in time, so that the cut still strikes (``verdicts.links``)."""

import socket
import threading

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from verdicts.holders import setnx_holder, someone_asks


@pytest.fixture
def silent_server():
    """A TCP port that takes connections and never answers: a Redis too busy to
    reply within the client's timeout."""
    listener = socket.create_server(("127.0.0.1", 0))
    taken: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                taken.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for connection in taken:
        connection.close()
    listener.close()


def test_a_look_the_redis_does_not_answer_sees_nobody(silent_server):
    # No retries: the lessons' clients retry a timed-out look, then see nobody just the same.
    client = redis.Redis(port=silent_server, socket_timeout=0.05, socket_connect_timeout=0.5,
                         retry=Retry(NoBackoff(), 0))
    with pytest.raises(redis.TimeoutError):  # what the looks would otherwise raise into the nemesis
        client.ping()
    assert setnx_holder(client) is None
    assert someone_asks(client) is False
