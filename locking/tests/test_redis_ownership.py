"""What every Redis lock owes its holder, the same test for each kind: a release
from a thread that does not hold the lock is refused, names the lock, and leaves it
held by its holder."""

import pytest

from common.testing import in_thread
from locking import LockNotOwnedError

# Its backends are asked for by name (getfixturevalue): conftest.py cannot see them.
pytestmark = pytest.mark.server


@pytest.fixture(params=["setnx", "redisson", "redisson_fair"])
def backend(request):
    return request.getfixturevalue(request.param)()


def test_a_release_by_another_thread_is_refused_and_leaves_the_lock(backend):
    lock = backend.lock("owned")
    lock.acquire()
    with pytest.raises(LockNotOwnedError) as caught:
        in_thread(lock.release)
    assert caught.value.lock_name == "owned"
    assert lock.owned()
    lock.release()
    assert not lock.locked()
