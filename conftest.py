"""Fixtures shared by every app's tests. The suite talks to the real MariaDB and
Redis of the local stack (``make test`` starts it); nothing here is a fake."""

import pytest
from django.core.cache import cache


@pytest.fixture(autouse=True)
def _clean_redis(request):
    """Each test starts with an empty test Redis database (db 1, never the stack's)."""
    if "django_db_setup" in request.fixturenames or request.node.get_closest_marker("django_db"):
        cache.clear()
    yield


@pytest.fixture
def product_factory(db):
    from inventory.services import product_reset

    def make(sku: str = "sku-1", stock: int = 10, name: str | None = None):
        return product_reset(sku=sku, stock=stock, name=name)

    return make
