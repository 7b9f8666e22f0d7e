from locking.backends.null import NullLockBackend


def test_null_lock_never_excludes():
    backend = NullLockBackend("none", {})
    a, b = backend.lock("stock:x"), backend.lock("stock:x")
    assert a.acquire() and b.acquire(blocking=False)
    assert not a.locked()
    a.release()
    b.release()
