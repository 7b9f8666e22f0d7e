"""A persister's place in the gate streams' consumer group: its leaving.

A consumer stays in a stream's group after its process ends: a persister named for
its pod (Kubernetes) or its host and PID leaves one behind at every rollout, and the
group's list of consumers grows with them. On its way out, once its last batch is
acknowledged, a persister deletes itself from every listed sale's group; where it
still holds entries (a batch that failed as it stopped) it stays, and another claims
them after ``FLASHSALE_GATE_CLAIM_IDLE_MS``: deleting it would drop them unwritten.
"""

from __future__ import annotations

import logging

import redis

from .lifecycle import gate_listed
from .store import GROUP, gate_keys

logger = logging.getLogger(__name__)


def consumer_leave(client: redis.Redis, name: str) -> tuple[int, int]:
    """Delete consumer ``name`` from the group of every listed sale's stream where it
    holds no entry. Returns (groups left, groups stayed in: entries still held)."""
    left = stayed = 0
    for sku in gate_listed():
        stream = gate_keys(sku).stream
        try:
            held = client.xpending_range(stream, GROUP, min="-", max="+", count=1, consumername=name)
        except redis.ResponseError:  # no stream or no group: nothing to leave
            continue
        if held:
            stayed += 1
            continue
        client.xgroup_delconsumer(stream, GROUP, name)
        left += 1
    if stayed:
        logger.warning("persister %s: stays in %d sales' groups, holding entries another will claim",
                       name, stayed)
    return left, stayed
