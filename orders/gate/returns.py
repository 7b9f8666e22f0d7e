"""Stock coming back to a gate sale (a sale with a payment window, ``payments``): an
expired order's units given back to Redis's stock, and a late payment's taken out
again, each once per order, by a marker in the sale's ``returns`` hash.

The database moves first (the order expired, its units back in the stock row and a
``return`` row in the ledger; or the order paid again with a ``resale`` row), so a
Redis that fails in between leaves the database right and Redis short: the expirer
gives what it owes again (``gate_return``'s markers make a second call do nothing).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import redis
from django.conf import settings

from common.errors import Unavailable

from .store import RETAKE, RETURN, gate_keys, gate_redis, gate_script


class Owed(NamedTuple):
    """An order whose units go back: its id, its quantity, its buyer."""

    order_id: int
    quantity: int
    user_id: str


def gate_return(*, sku: str, orders: Iterable[Owed], refunded: bool = False) -> dict[int, str]:
    """Give each order's units back to ``sku``'s sale in Redis, expired orders' (or,
    ``refunded``, paid orders' refunded at the provider): order id -> what the script
    did (``returned``, ``already``, ``other``: not the sale Redis holds, whose stock
    the database loaded with them back; ``cold``: no sale held; ``failover``: the
    sale held was opened on another server, and a rebuild is to replace it: still owed).

    :raises Unavailable: Redis cannot be reached (some may have been given back: the
        markers make the next call for them do nothing).
    """
    k = gate_keys(sku)
    script = gate_script(RETURN)
    owed = list(orders)
    calls = [dict(keys=[k.sale, k.returns, k.bought],
                  args=[order.order_id, order.quantity, order.user_id, "refunded" if refunded else "expired"])
             for order in owed]
    try:
        if settings.FLASHSALE_GATE_REDIS_CLUSTER:
            # A Cluster's pipeline refuses scripts: one call each, on the sale's node.
            replies = [script(**call) for call in calls]
        else:
            with gate_redis().pipeline(transaction=False) as pipe:
                for call in calls:
                    script(**call, client=pipe)
                replies = pipe.execute()
    except redis.RedisError as e:
        raise Unavailable("the gate's Redis cannot be reached to give units back", backend="redis") from e
    return {order.order_id: reply[0] for order, reply in zip(owed, replies, strict=True)}


class Retaken(NamedTuple):
    """What a late payment's take in Redis did: ``outcome`` (``retaken``, ``kept``,
    ``already``, ``sold_out``, ``limit``, ``cold``, ``failover``), the stock it left
    (``retaken`` only), and the sale that decided (its block; None: ``cold``,
    ``failover``)."""

    outcome: str
    left: int | None
    sale: int | None


def gate_retake(*, sku: str, order: Owed) -> Retaken:
    """Take a late-paid order's units out of ``sku``'s sale in Redis again: ``retaken``
    (and the stock it left), ``kept`` (never given back: the order keeps them),
    ``already``, ``sold_out``, ``limit`` (the buyer's per-user limit) or ``cold``.

    :raises Unavailable: Redis cannot be reached.
    """
    k = gate_keys(sku)
    try:
        reply = gate_script(RETAKE)(keys=[k.sale, k.returns, k.bought],
                                 args=[order.order_id, order.quantity, order.user_id,
                                       settings.FLASHSALE_PER_USER_LIMIT])
    except redis.RedisError as e:
        raise Unavailable("the gate's Redis cannot be reached to take units again", backend="redis") from e
    if reply[0] in ("cold", "failover"):
        return Retaken(reply[0], None, None)
    return Retaken(reply[0], int(reply[1]) if reply[0] == "retaken" else None, int(reply[2]))
