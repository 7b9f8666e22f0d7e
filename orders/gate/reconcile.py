"""A gate sale after its Redis failed over: paused, then rebuilt from the database.

Redis replicates asynchronously. A replica promoted (by Sentinel, or by a Redis
Cluster for its shard) holds the sale as it was when its copy last caught up: the
scripts the old primary ran after that are missing, with their units and their
stream entries, while the persisters may have written some of them to MySQL already.
Selling on from the promoted copy would sell those units again.

So a sale remembers the server that opened it (its run id, ``primary`` in the sale's
hash), and the sale's script refuses to decide anything on another server
(``sell.lua``: the purchase is answered 503 with Retry-After). A reconciliation then
waits until the persisters have written every entry the new primary's stream holds
(whichever of them the old primary had sent it), marks the old sale superseded in
MySQL (from then on no persister writes an order of it, from any server), and opens a
new sale of what MySQL has left, with its orders' Idempotency-Keys and per-user
counts: the units MySQL holds are never sold again, and every order in it answers
its key's replays.

The persisters reconcile by themselves as they find a sale failed over;
``manage.py gate_reconcile`` does it by hand. Either is idempotent: run twice, or by
two processes at once, it opens one new sale (the old sale's row, locked in MySQL,
decides who does; Redis opens it only in place of the sale it replaces).

What it cannot bring back: a 201 whose script never reached the promoted server and
that no persister wrote. With ``FLASHSALE_GATE_REPLICAS`` at 1 or more there is none
(a 201 waits for a replica); with 0 it is the price of the primary alone.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import cast

import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from common.errors import Busy, Unavailable
from common.gateredis import text
from inventory.models import Stock

from ..models import GateSale
from ..window import SaleWindow
from .lifecycle import gate_open, gate_written
from .store import gate_keys, gate_redis
from .takeover import orders_loaded

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reconciled:
    """A sale rebuilt after a failover."""

    sku: str
    replaced: int  # the sale that failed over
    sale: int  # the sale opened in its place
    redis_stock: int  # the stock the promoted server held
    stock: int  # the stock MySQL has left: the new sale's


def _servers(skus: list[str]) -> dict[str, str]:
    """The run id of the server holding each product's sale now."""
    client = gate_redis()
    if not settings.FLASHSALE_GATE_REDIS_CLUSTER:
        run_id = client.info("server")["run_id"]
        return dict.fromkeys(skus, run_id)
    cluster = cast(redis.RedisCluster, client)  # typed as the Redis it stands in for (gate_redis)
    ids: dict[str, str] = {}
    by_node: dict[str, str] = {}
    for sku in skus:
        node = cluster.get_node_from_key(gate_keys(sku).sale)
        if node.name not in by_node:
            by_node[node.name] = cluster.get_redis_connection(node).info("server")["run_id"]
        ids[sku] = by_node[node.name]
    return ids


def sales_failed_over(skus: list[str], *names: str) -> dict[str, list[str | None]]:
    """Those of ``skus`` whose sale Redis holds on another server than the one that
    opened it, each with the fields ``names`` of that sale, read with its server's.

    :raises redis.RedisError: Redis cannot be reached.
    """
    pipe = gate_redis().pipeline(transaction=False)  # one round trip (a Cluster's: one a node)
    for sku in skus:
        pipe.hmget(gate_keys(sku).sale, "primary", *names)
    held = dict(zip(skus, pipe.execute(), strict=True))
    # Asked after the sales were read: a sale read before a failover and held on the
    # server after it did fail over, and one opened since is held where it opened.
    servers = _servers(skus)
    return {sku: row[1:] for sku, row in held.items() if row[0] is not None and row[0] != servers[sku]}


def gate_failed_over(skus: list[str]) -> list[str]:
    """Those of ``skus`` whose sale failed over (``sales_failed_over``): their
    purchases are refused until they are reconciled.

    :raises redis.RedisError: Redis cannot be reached.
    """
    return list(sales_failed_over(skus))


def gate_reconcile(*, sku: str, within: float = 0.0) -> Reconciled | None:
    """Rebuild ``sku``'s sale from MySQL if its Redis failed over since it opened.

    :param within: seconds to wait for the persisters to write what the stream holds.
    :returns: what was done; None if there was nothing to do (the sale did not fail
        over, Redis holds none, or another reconciliation did it).
    :raises Busy: the stream is not written within ``within`` seconds, or it has dead
        letters (``manage.py gate_redrive`` first): nothing was changed.
    :raises Unavailable: the gate's Redis cannot be reached.
    """
    try:
        # The sale that failed over, named in the read that found it so: read again,
        # Redis could hold the sale another reconciliation opened since, selling.
        held = sales_failed_over([sku], "block", "stock").get(sku)
    except redis.RedisError as e:
        raise Unavailable("the gate's Redis cannot be reached", backend="redis") from e
    if held is None or None in held:
        return None
    block, redis_stock = cast(list[str], held)
    block_id = int(text(block))
    gate_written(skus=[sku], within=within)
    with transaction.atomic():
        # Locked as every persister's batch of the sale locks it: the batches in flight
        # commit first, and none after this writes an order of the old sale.
        old = GateSale.objects.select_for_update().select_related("product").filter(pk=block_id).first()
        if old is None:
            return None  # the product was reset meanwhile: the reset's sale is another
        product = old.product
        # The stock and the orders in one snapshot (the first plain read makes it):
        # an order that expires after it is pending in it, and the new sale gives its
        # units back; one that expired before is in the stock loaded.
        segments = list(Stock.objects.filter(product=product))
        orders = orders_loaded(product)
        if len(segments) != 1:
            raise Busy(f"{sku} has {len(segments)} stock segments: reset it under the gate instead")
        stock = segments[0].quantity
        if old.superseded_at is None:
            new = GateSale.objects.create(product=product, loaded_stock=stock)
            old.superseded_at = timezone.now()
            old.save(update_fields=["superseded_at"])
        else:  # another superseded it; Redis may not hold its sale yet
            newer = GateSale.objects.filter(product=product, pk__gt=old.pk).order_by("-pk").first()
            if newer is None:
                return None
            new = newer
    # The stock and the orders of this snapshot, together: the sale's own loaded_stock
    # is of the snapshot of the reconciler that made it, and an order may have expired
    # since (its unit in this stock, its return marked done in these orders).
    if not gate_open(sale=new, window=SaleWindow.of(product), orders=orders, replacing=old.pk,
                     staged=secrets.token_hex(8), stock=stock):
        return None
    if stock != new.loaded_stock:  # the sale's row says what Redis loaded
        GateSale.objects.filter(pk=new.pk).update(loaded_stock=stock)
    done = Reconciled(sku=sku, replaced=old.pk, sale=new.pk, redis_stock=int(text(redis_stock)), stock=stock)
    logger.warning("reconciled the sale of %s after a failover: sale %d replaced by sale %d, stock %d "
                   "(the promoted Redis held %d: %+d), %d orders' keys loaded", sku, done.replaced, done.sale,
                   done.stock, done.redis_stock, done.stock - done.redis_stock, len(orders.keys))
    return done

