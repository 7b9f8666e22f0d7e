import threading

import pytest
from django.test import override_settings

from locking import InvalidLockBackendError, get_lock, locks
from locking.backends.local import LocalLock, LocalLockBackend

LOCAL = {"local": {"BACKEND": "locking.backends.local.LocalLockBackend", "OPTIONS": {"wait_timeout": 3}}}


@override_settings(LOCKING=LOCAL)
def test_builds_the_configured_backend_with_its_options():
    lock = get_lock("stock:x", alias="local")
    assert isinstance(lock, LocalLock)
    assert lock.wait_timeout == 3


@override_settings(LOCKING=LOCAL)
def test_one_backend_per_alias_shared_by_all_threads():
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(locks["local"])) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(b) for b in seen}) == 1
    assert isinstance(seen[0], LocalLockBackend)


@override_settings(LOCKING=LOCAL)
def test_unknown_alias_is_a_configuration_error():
    with pytest.raises(InvalidLockBackendError, match="no alias 'redis'"):
        get_lock("stock:x", alias="redis")


@override_settings(LOCKING={"bad": {"BACKEND": "locking.backends.nope.NopeBackend"}})
def test_unimportable_backend_is_a_configuration_error():
    with pytest.raises(InvalidLockBackendError, match="could not import"):
        get_lock("stock:x", alias="bad")


def test_settings_change_resets_backends():
    with override_settings(LOCKING=LOCAL):
        first = locks["local"]
    with override_settings(LOCKING=LOCAL):
        assert locks["local"] is not first
