"""A gate sale as Redis holds it: an order the persisters have not written, followed
by its buyer; and a sale's counts (the tally), which the audit, the backlog's metrics
and a handover read."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

import redis

from common.errors import Unavailable
from common.gateredis import fields, text

from ..models import GateSale
from .store import GROUP, ID_BLOCK_SHIFT, gate_keys, gate_redis


@dataclass(frozen=True)
class OrderStatus:
    """An order as its buyer can follow it."""

    order_id: int
    sku: str
    quantity: int
    strategy: str
    instance: str
    # "confirmed" (in the database), "accepted" (in the gate's stream) or
    # "dead_lettered" (the persisters could not write it).
    status: str
    user_id: str = ""  # its buyer: whom it is shown to, with buyers signed in
    # Its payment step, once in the database: "placed" (none), "pending" until
    # expires_at, then "paid" or "expired" ("refunded": paid too late). None before.
    payment_status: str | None = None
    expires_at: datetime.datetime | None = None


def gate_order_get(*, order_id: int) -> OrderStatus | None:
    """An order the gate accepted that the database does not have (yet)."""
    if order_id % 2:
        return None  # odd: one of MySQL's ids
    sale = GateSale.objects.select_related("product").filter(pk=order_id >> ID_BLOCK_SHIFT).first()
    if sale is None:
        return None
    k = gate_keys(sale.product.sku)
    client = gate_redis()
    try:
        where = client.hget(k.orders, str(order_id))
        if where is None:
            return None
        status, _, entry_id = text(where).rpartition(" ")
        entries = client.xrange(k.stream, entry_id, entry_id)
    except redis.RedisError as e:
        raise Unavailable("the gate's Redis cannot be reached", backend="redis") from e
    entry = fields(entries[0][1]) if entries else None
    if not entry:
        return None  # deleted from the stream since
    return OrderStatus(order_id=order_id, sku=sale.product.sku, quantity=int(entry["quantity"]),
                       strategy="gate", instance=entry["instance"],
                       status="dead_lettered" if status == "dead" else "accepted", user_id=entry["user"])


@dataclass(frozen=True)
class GateTally:
    """The gate's side of a sale, for the audit."""

    redis_remaining: int
    loaded: int  # the stock Redis was loaded with
    accepted: int  # orders in the stream
    accepted_quantity: int
    unacknowledged: int  # entries a persister read and has not acknowledged
    undelivered: int  # entries no persister has read yet
    dead_lettered: int
    last_delivered: str | None = None  # the persisters' group's last entry read (None: no group yet)
    # Units expired orders gave back to Redis's stock, and of those, units late
    # payments took out again (payments): stock = loaded - accepted + returned - retaken.
    returned: int = 0
    retaken: int = 0
    sale: int | None = None  # the gate sale (its row's id) Redis holds these counts of


def gate_tally(*, sku: str) -> GateTally | None:
    """The gate's counts for ``sku``; None if Redis holds no sale of it."""
    return gate_tallies([sku])[sku]


# What a tally reads of each sale, in this order.
_TALLY_READS = 5


def gate_tallies(skus: list[str]) -> dict[str, GateTally | None]:
    """``gate_tally`` of each of ``skus``, in one round trip (a Cluster's: one a
    node): the audit asks of one sale, the backlog and a handover of every listed one.

    :raises Unavailable: Redis cannot be reached.
    """
    pipe = gate_redis().pipeline(transaction=False)
    for sku in skus:
        k = gate_keys(sku)
        pipe.hgetall(k.sale)
        pipe.xlen(k.stream)
        pipe.xlen(k.dead)
        pipe.xinfo_groups(k.stream)
        pipe.xinfo_stream(k.stream)
    try:
        # An error reply stands in its place: a sale Redis does not hold has no stream.
        replies = pipe.execute(raise_on_error=False)
    except redis.RedisError as e:
        raise Unavailable("the gate's Redis cannot be reached", backend="redis") from e
    return {sku: _tally(replies[i * _TALLY_READS:(i + 1) * _TALLY_READS]) for i, sku in enumerate(skus)}


def _tally(replies: list[Any]) -> GateTally | None:
    sale, accepted, dead, groups, stream = replies
    if not sale:
        return None
    if errors := [reply for reply in replies if isinstance(reply, Exception)]:
        raise Unavailable(f"the gate's Redis could not be read: {errors[0]}", backend="redis")
    group = next((g for g in groups if g["name"] == GROUP), None)
    last = stream["last-generated-id"] if group else None
    return GateTally(
        redis_remaining=int(sale["stock"]), loaded=int(sale["loaded"]), accepted=accepted,
        accepted_quantity=int(sale["accepted"]),
        unacknowledged=group["pending"] if group else 0,
        undelivered=_undelivered(group, last, accepted),
        dead_lettered=dead, last_delivered=group["last-delivered-id"] if group else None,
        returned=int(sale.get("returned", 0)), retaken=int(sale.get("retaken", 0)),
        sale=int(sale["block"]) if "block" in sale else None,
    )


def _undelivered(group: dict[str, Any] | None, last_generated: str | None, accepted: int) -> int:
    """The stream's entries the persisters' group has not been delivered yet."""
    if group is None:
        return accepted
    if group["last-delivered-id"] == last_generated:
        return 0  # exact: Redis 7.0's "lag" can stay above 0 for a group that read everything
    # Behind: Redis's own count ("lag"), None when it cannot tell; then every entry
    # may be unread, as far as anyone knows.
    lag = group.get("lag")
    return accepted if lag is None else lag
