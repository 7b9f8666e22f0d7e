"""Fixtures shared by every app's tests. The suite talks to the real MariaDB and
Redis of the local stack (``make test`` starts it); nothing here is a fake."""

import pytest
from django.core.cache import cache

from common.memory import forget_everything
from loadtest.client import FlashsaleClient
from orders.gate.store import gate_redis
from stack.config import StackConfig
from stack.control import apps_as_needed
from stack.supervisor import Supervisor


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
def stack_apps(stack_config):
    """``stack_apps(strategy=..., instances=..., ...)`` restarts the stack's app
    instances so configured (only when that is not what runs) and returns an API
    client for them through nginx; at the end they are put back as started. Between
    two tests nothing sells, so the instances restart all at once, not half at a time;
    a test that switches while it sells asks for that (``rolling=True``)."""
    with apps_as_needed(stack_config, rolling=False) as use:
        yield lambda **changes: FlashsaleClient.for_stack(use(**changes))


# What reaches a server of the stack: a test that asks for one of these fixtures
# (itself or through another) or carries one of these marks is marked ``server``.
# ``make check`` runs the others with no stack up, so a test that needs a server and
# says nothing of it fails there.
SERVER_FIXTURES = {"db", "transactional_db", "django_db_setup", "stack_config", "stack_apps",
                   "redis_url", "zk_root", "live_server"}
SERVER_MARKS = ("django_db", "e2e", "server")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marks
def pytest_collection_modifyitems(items):
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())) or any(
                item.get_closest_marker(mark) for mark in SERVER_MARKS):
            item.add_marker(pytest.mark.server)
