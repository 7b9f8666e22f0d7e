"""Fixtures shared by every app's tests. The suite talks to the real MariaDB and
Redis of the local stack (``make test`` starts it); nothing here is a fake."""

import gc
import json
import os
from pathlib import Path

import pytest
from django.core.cache import cache

from common.memory import forget_everything
from loadtest.buyers import MadeBuyers
from loadtest.client import FlashsaleClient
from orders.gate.store import gate_redis
from stack.appgroups import apps_asked, apps_order, apps_recorded
from stack.config import StackConfig
from stack.control import apps_as_needed, watch
from stack.servers import infrastructure
from stack.suite import APPS_LEFT
from stack.supervisor import Supervisor

pytest_plugins = [
    "stack.testcpu",  # each test's CPU, when make test asks (stack/testcpu.py)
    "stack.pool",  # in make test, a part's own tests, then what it draws from the pool (stack/pool.py)
]


@pytest.fixture(autouse=True)
def _clean_redis(request):
    """Each test starts with empty test Redis databases (db 1 of the cache's Redis and
    of the gate's, never the stack's db 0)."""
    if "django_db_setup" in request.fixturenames or request.node.get_closest_marker("django_db"):
        cache.clear()
        gate_redis().flushdb()
        forget_everything()  # what this process remembers of the sales goes with them
    yield


@pytest.fixture
def admin_api(settings):
    """An API client with the admin token."""
    from rest_framework.test import APIClient

    settings.FLASHSALE_ADMIN_TOKEN = "test-token"
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token test-token")
    return client


@pytest.fixture
def product_factory(db):
    from inventory.services import product_reset

    def make(sku: str = "sku-1", stock: int = 10, name: str | None = None, segments: int = 1):
        return product_reset(sku=sku, stock=stock, name=name, segments=segments)

    return make


@pytest.fixture(scope="session")
def stack_config() -> StackConfig:
    config = StackConfig.from_env()
    if not Supervisor(config).is_running():
        pytest.fail("the local stack is not running: `make test` starts it "
                    "(or `python -m stack run -- pytest`)")
    return config


@pytest.fixture(scope="session")
def stack_watchers(stack_config) -> StackConfig:
    """The stack's Prometheus, exporters, Alertmanager and pager, started if they are
    not running: ``make test``'s stacks leave them stopped until a test asks, and
    once started they run to the end of the part (its tests that ask run last)."""
    watch(stack_config)
    return stack_config


@pytest.fixture(scope="session")
def _apps_in_use(stack_config):
    # Put back as started at the end, unless make test stops the stack next (stack.suite).
    with apps_as_needed(stack_config, rolling=False, put_back=not os.environ.get(APPS_LEFT)) as use:
        yield use


@pytest.fixture(scope="session")
def _apps_asked():
    """What each test asked of the app instances; written where ``python -m stack
    test`` says, which keeps it in ``.test_apps`` to order the next runs by."""
    asked: dict[str, str] = {}
    yield asked
    if out := os.environ.get("FLASHSALE_TEST_APPS_OUT"):
        Path(out).write_text(json.dumps(asked, indent=1, sort_keys=True) + "\n")


@pytest.fixture
def stack_apps(stack_config, _apps_in_use, _apps_asked, request):
    """``stack_apps(strategy=..., instances=..., ...)`` restarts the stack's app
    instances so configured (only when that is not what runs) and returns an API
    client for them through nginx; at the end of the run they are put back as
    started. Between two tests nothing sells, so the instances restart all at once
    (and stop at once), not half at a time; a test that switches while it sells asks
    for that (``rolling=True``)."""
    def use(**changes):
        asked = {name: value for name, value in changes.items() if name != "rolling"}
        _apps_asked.setdefault(request.node.nodeid, apps_asked(stack_config, asked))
        config = _apps_in_use(**changes)
        return FlashsaleClient.for_stack(config, tokens=MadeBuyers(config))

    return use


# What reaches a server of the stack: a test that asks for one of these fixtures
# (itself or through another) or carries one of these marks is marked ``server``.
# ``make check`` runs the others with no stack up (and none marked ``system``: they run
# a program from a Debian package), so a test that needs a server and says nothing of
# it fails there.
SERVER_FIXTURES = {"db", "transactional_db", "django_db_setup", "stack_config", "stack_apps",
                   "redis_url", "zk_root", "live_server"}
SERVER_MARKS = ("django_db", "e2e", "server")

# Each lane of ``make test`` (stack/suite.py) runs two pytest at once on its stack,
# each with a test database and Redis databases of its own (flashsale.settings.test).
# What cannot run beside anything else goes to the first, in order (``stack``): the
# tests that drive the stack's app instances, nginx or its watchers (they restart the
# instances at will).
# A test on servers of its own (``hosted``: stack.hosted's test hosts; the second
# stack) needs none of them. A test that faults a server both use (``exclusive``)
# runs after both, alone.
STACK_FIXTURES = {"stack_apps", "stack_config", "live_server"}


def drives_the_stack(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    if "second_run_dir" in names or item.get_closest_marker("hosted"):
        return False
    return bool(names & STACK_FIXTURES) or bool(item.get_closest_marker("e2e"))


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marks
def pytest_collection_modifyitems(items):
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())) or any(
                item.get_closest_marker(mark) for mark in SERVER_MARKS):
            item.add_marker(pytest.mark.server)
        if drives_the_stack(item):
            item.add_marker(pytest.mark.stack)
    # Grouped by what they ask of the app instances: fewer restarts (stack.suite). Those
    # that read the watchers last, so that until then the watchers cost nothing.
    asked = apps_recorded()
    watching = {item.nodeid for item in items if "stack_watchers" in getattr(item, "fixturenames", ())}
    order = apps_order([item.nodeid for item in items], asked, last=watching)
    items.sort(key=lambda item: order[item.nodeid])


def pytest_collection_finish(session):
    """What the run has made so far (its plugins, Django, the collected tests) lives to
    its end: frozen, no collection walks it again (as ``flashsale.boot`` does for the
    entry points)."""
    gc.freeze()


# What stops, signals or replaces a server through supervisord.
FAULTING = ("stop", "signal_group", "kill", "replace_all", "remove", "shutdown")


@pytest.fixture(autouse=True)
def _shared_servers_left_alone(request, monkeypatch):
    """Beside the other pytest, a test that faults the stack's MariaDB, Redis or
    ZooKeeper fails at once, naming the mark it lacks, instead of failing the other
    worker's tests at random."""
    if not os.environ.get("FLASHSALE_TEST_WORKER") or request.node.get_closest_marker("exclusive"):
        yield
        return

    def guarded(method):
        original = getattr(Supervisor, method)

        def faulting(self, *args, **kwargs):
            shared = StackConfig.from_env()  # read only when a test faults something
            shared_names = {server.name for server in infrastructure(shared)}
            if method == "shutdown":
                names = shared_names
            else:
                named = args[0] if args else kwargs.get("name", kwargs.get("names", ()))
                names = {named} if isinstance(named, str) else set(named)
            if self.config.run_dir == shared.run_dir and (hit := names & shared_names):
                raise AssertionError(f"{request.node.nodeid} faults {', '.join(sorted(hit))}, which the "
                                     f"other pytest's tests use: mark it exclusive")
            return original(self, *args, **kwargs)

        return faulting

    for method in FAULTING:
        monkeypatch.setattr(Supervisor, method, guarded(method))
    yield
