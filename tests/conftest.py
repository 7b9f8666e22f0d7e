"""End-to-end fixtures beyond the root conftest's ``stack_apps``: a second stack; the
production overlay rendered."""

from __future__ import annotations

import pytest
from django.db import connections

from .second_stack import stack


@pytest.fixture
def second_run_dir(tmp_path):
    """A run directory for a second stack (tests/second_stack.py), stopped afterwards
    whatever a failed assertion left running, and its directories outside removed."""
    yield tmp_path
    stack(tmp_path, "clean")


@pytest.fixture
def reconnect_afterwards():
    yield
    connections.close_all()  # the suite's own connections, should MariaDB have restarted under them


@pytest.fixture(scope="session")
def production() -> list[dict]:
    """The production overlay, rendered once for the checks that plant a fault in a
    copy of it (test_k8s_properties.py, test_k8s_database.py)."""
    from .test_k8s import K8S, render

    return render(K8S / "overlays" / "production")
