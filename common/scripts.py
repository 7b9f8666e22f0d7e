"""Lua scripts registered once per client and source: redis-py's ``Script`` hashes its
source when it is made, and a hot path should not pay for that each call."""

from __future__ import annotations

import redis
from redis.commands.core import Script

_handles: dict[tuple[int, str], Script] = {}


def script_on(client: redis.Redis, source: str) -> Script:
    """``source``'s handle on ``client``, made at its first use."""
    handle = _handles.get((id(client), source))
    if handle is None:
        handle = _handles[(id(client), source)] = client.register_script(source)
    return handle


def scripts_forget() -> None:
    """Drop every handle: a client replaced may leave its id to the next one."""
    _handles.clear()
