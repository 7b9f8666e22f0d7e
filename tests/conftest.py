"""End-to-end fixtures: the running local stack (``make test`` brings it up), its app
instances reconfigured per test and put back as they were at the end."""

from __future__ import annotations

import pytest

from loadtest.client import FlashsaleClient
from stack.config import StackConfig
from stack.control import reconfigure
from stack.supervisor import Supervisor

from .second_stack import stack


@pytest.fixture(scope="session")
def stack_config() -> StackConfig:
    config = StackConfig.from_env()
    if not Supervisor(config).is_running():
        pytest.fail("the local stack is not running: `make test` starts it "
                    "(or `python -m stack run -- pytest`)")
    return config


@pytest.fixture(scope="session")
def stack_apps(stack_config):
    """``stack_apps(strategy=..., instances=..., ...)`` restarts the app instances so
    configured and returns an API client for them through nginx."""
    current = stack_config

    def use(**changes) -> FlashsaleClient:
        nonlocal current
        wanted = stack_config.replace(**changes)
        if wanted != current:
            current = reconfigure(wanted)
        return FlashsaleClient(wanted.base_url, admin_token=wanted.admin_token())

    yield use
    if current != stack_config:
        reconfigure(stack_config)


@pytest.fixture
def second_run_dir(tmp_path):
    """A run directory for a second stack (tests/second_stack.py), stopped afterwards
    whatever a failed assertion left running."""
    yield tmp_path
    stack(tmp_path, "down")
