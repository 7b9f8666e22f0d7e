"""A gate sale's life in Redis: opened by the reset, closed, warmed again
after Redis lost it, handed to the database when the deployment leaves the gate.

The gate decides a sale in Redis and writes it to the database afterwards. The
reset loads the product's stock into Redis (``gate_open``). From then on a purchase
is one Lua script, atomic on the Redis server: it answers a replayed
Idempotency-Key with its first answer, checks the per-user limit and the stock,
takes the units, and appends the order intent to the product's stream with XADD.
Either all of that happens or none: there is no moment in which the stock was taken
and the intent is missing. The buyer hears 201 ``accepted`` with the order's id; the
persisters (``orders.gate.persister``) write the stream to MySQL in batches, and the
order turns ``confirmed``.

Every key of one product carries the same hash tag, ``{<sku>}``, so on a Redis
Cluster they live in one slot and one script may touch them all.

Order ids are known before the row exists: the sale's block (a ``GateSale`` row,
allocated by MySQL at the reset) and the units sold before this order make the id,
``block * 2**25 + 2 * sold_before``. Even, so never one of MySQL's own (odd, see
the settings), and one per unit sold, so never reused within a sale.

Once a sale's stock is 0 it stays 0 until a reset opens another, and so does its set
of keys: each process then remembers the sale sold out, with those keys, and
answers a purchase whose key is not among them 409 without the script (the
seckill peers' local "sold out" map, made to keep replays true). The memory lasts
``FLASHSALE_GATE_SOLD_OUT_MEMORY_S`` from before the read it stands on; a reset of a
sold-out sale answers only once that long has passed since it closed the sale, so
after the reset no process answers from the old one.

What this trades away: an accepted order is as durable as Redis is (its AOF), not
as MySQL is; see the gate's page (docs/strategies/gate.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping

import redis
from django.conf import settings
from django.db import transaction
from redis.typing import EncodableT, FieldT

from common.errors import Busy, InvalidInput, Unavailable
from common.gateredis import text
from common.strategies import strategy_of
from inventory.models import Product, Stock
from inventory.selectors import segments_get
from waitingroom.models import Room

from ..models import GateSale
from ..window import SaleWindow
from .sell import sold_out_forget
from .store import (
    CLOSE,
    FINISHED,
    GROUP,
    ID_BLOCK_SHIFT,
    OLD_LIST,
    OPEN,
    SALES,
    UNLIST,
    gate_keys,
    gate_redis,
    gate_script,
)
from .takeover import OrdersLoaded, orders_loaded
from .tally import gate_tallies, gate_tally

logger = logging.getLogger(__name__)


# --- opening a sale --------------------------------------------------------------------


def gate_open(*, sale: GateSale, window: SaleWindow, orders: OrdersLoaded | None = None,
              replacing: int | None = None, staged: str = "", stock: int | None = None) -> bool:
    """Load ``sale`` (its product's stock, its id block, its ``window``) into Redis, with
    what it takes over of the orders the product already has (a warm-up after Redis
    lost the sale, a reconciliation: ``orders``), and put the sale on the persisters'
    list. Whatever Redis held of the product before is dropped, in one step with the
    loading; with ``replacing`` (a sale's id), only if that is the sale Redis holds of
    the product. The orders' hashes are written beforehand under names of the
    opening's own (the sale's id and ``staged``, which tells apart two processes
    opening the same sale). ``stock``: what it loads, when not the sale's
    ``loaded_stock`` (it must be of the same snapshot as ``orders``).

    :returns: whether it opened (False: Redis holds another sale than ``replacing``).
    """
    k = gate_keys(sale.product.sku)
    # Under the product's hash tag: one slot with its keys.
    staging = tuple(f"{key}:{sale.pk}{staged}" for key in (k.keys, k.bought, k.returns))
    orders = orders or OrdersLoaded({}, {}, {}, [])
    client = gate_redis()
    try:
        client.delete(*staging)
        tables: tuple[Mapping[str, str | int], ...] = (orders.keys, orders.bought, orders.returns)
        for key, loaded in zip(staging, tables, strict=True):
            for chunk in _chunks(loaded):
                client.hset(key, mapping=chunk)
        units = sale.loaded_stock if stock is None else stock
        opened = gate_script(OPEN)(keys=[*k, *staging], args=[
            units, sale.pk << ID_BLOCK_SHIFT, time.time(), sale.pk, GROUP, _ms(window.starts_at),
            _ms(window.ends_at), "" if replacing is None else replacing,
            "1" if sale.product.payment_window_s else "0",
            "1" if Room.objects.filter(product_id=sale.product_id).exists() else "0",
            "".join(f" {block} " for block in orders.adopted)])
        if opened:
            client.hset(SALES, sale.product.sku, sale.pk)
    except redis.RedisError as e:
        raise Unavailable(f"the gate's Redis cannot be reached; the sale of {sale.product.sku} "
                          "is not open", backend="redis") from e
    if opened:
        _persisters_woken(client)
    return bool(opened)


def _persisters_woken(client: redis.Redis) -> None:
    """End the wait of every persister blocked on the streams it read (as if it timed
    out), so that its next round reads the list again and the sale just listed with
    it: an idle persister waits up to a second. A cluster's persisters poll, every
    0.2 s while a sale is listed. Only a late first write if this fails: logged."""
    if settings.FLASHSALE_GATE_REDIS_CLUSTER:
        return
    db = str(client.get_connection_kwargs().get("db", 0))  # this deployment's (the tests have others)
    try:
        for waiting in client.client_list():
            if (waiting.get("cmd") == "xreadgroup" and "b" in waiting.get("flags", "")
                    and waiting.get("db") == db):
                client.client_unblock(int(waiting["id"]))
    except redis.RedisError as e:
        logger.info("the persisters were not woken for the sale just listed: %s", e)


def gate_close(*, sku: str, required: bool) -> float:
    """Stop selling ``sku`` from Redis and drop its sale there (every reset does
    this first).

    :returns: until when (``time.monotonic()``) a process may still answer from its
        memory that the closed sale sold out: the caller's answer waits for it
        (``gate_settle``), so that none does after it. Now, if the sale was not sold
        out (no process remembers it so).
    :raises Unavailable: Redis cannot be reached and the close is ``required`` (the
        product has, or is to have, a gate sale: left in Redis, it would go on
        accepting orders no persister may write). Otherwise that is only logged.
    """
    try:
        stock = gate_script(CLOSE)(keys=list(gate_keys(sku)))
        gate_redis().hdel(SALES, sku)
    except redis.RedisError as e:
        if required:
            raise Unavailable(f"the gate's Redis cannot be reached to close the sale of {sku}; "
                              "nothing was reset", backend="redis") from e
        logger.warning("could not close the gate of %s (it has no gate sale): %s", sku, e)
        return time.monotonic()
    sold_out_forget(sku)
    closed = time.monotonic()
    return closed + settings.FLASHSALE_GATE_SOLD_OUT_MEMORY_S if stock == "0" else closed


def gate_listed() -> list[str]:
    """The products on the persisters' list, in order."""
    return sorted(text(sku) for sku in gate_redis().hkeys(SALES))


def gate_list_upgrade() -> int:
    """Move the products on the list's earlier form (a set of skus, every sale ever
    opened) onto the list, each with the sale Redis holds of it, so that a stack
    upgraded with sales open keeps writing them; a reset since listed its own (kept).
    Returns how many were moved.

    :raises redis.RedisError: Redis cannot be reached.
    """
    client = gate_redis()
    moved = 0
    for member in client.smembers(OLD_LIST):
        sku = text(member)
        sale = client.hget(gate_keys(sku).sale, "block")
        if sale is not None:
            moved += client.hsetnx(SALES, sku, sale)
    client.delete(OLD_LIST)
    return moved


def gate_unlist_finished(skus: Iterable[str]) -> list[str]:
    """Take those of ``skus`` whose sale is finished off the persisters' list: sold
    out or ended, and every order in its stream written and acknowledged. Their keys
    stay (the audit and the replays read them); a reset lists the next sale. A sale
    whose keys Redis lost leaves the list too: there is nothing to read, and the
    warm-up (``gate_warm``) lists it again. One round trip for them all (on a Redis
    Cluster, one a sale): the persisters ask this of every listed sale at each claim
    pass. Returns those taken off.

    :raises redis.RedisError: Redis cannot be reached.
    """
    asked = list(skus)
    if not asked:
        return []
    client, finished = gate_redis(), gate_script(FINISHED)
    calls = [([k.sale, k.stream], [GROUP]) for k in map(gate_keys, asked)]
    if settings.FLASHSALE_GATE_REDIS_CLUSTER:
        # A Cluster's pipeline refuses scripts: one call each, on the sale's node.
        listed = client.hmget(SALES, asked)
        sales = [finished(keys=keys, args=args) for keys, args in calls]
    else:
        with client.pipeline(transaction=False) as pipe:
            pipe.hmget(SALES, asked)
            for keys, args in calls:
                finished(keys=keys, args=args, client=pipe)
            listed, *sales = pipe.execute()
    unlist = gate_script(UNLIST)
    return [sku for sku, on, sale in zip(asked, listed, sales, strict=True)
            if on is not None and sale is not None and unlist(keys=[SALES], args=[sku, sale or on])]


def gate_written(*, skus: list[str], within: float) -> None:
    """Until the persisters have written and acknowledged every entry of the sales of
    ``skus`` (a sale Redis does not hold has nothing to write), within ``within``
    seconds. Sales nothing sells any more (refused, or left): one written stays so.

    :raises Busy: dead letters wait (an operator's: ``manage.py gate_redrive``), or
        orders are still unwritten after ``within`` seconds.
    :raises Unavailable: the gate's Redis cannot be reached.
    """
    deadline = time.monotonic() + within
    # Asked again of the sales still unwritten only: nothing sells the others any more.
    while unwritten := {sku: tally for sku, tally in gate_tallies(skus).items() if tally is not None
                        and (tally.undelivered or tally.unacknowledged or tally.dead_lettered)}:
        dead = {sku: tally.dead_lettered for sku, tally in unwritten.items() if tally.dead_lettered}
        if dead:
            raise Busy(f"dead letters ({', '.join(f'{sku}: {n}' for sku, n in dead.items())}): redrive them")
        if time.monotonic() >= deadline:
            raise Busy(f"orders not written after {within:g} s: are the persisters running?")
        skus = list(unwritten)
        time.sleep(0.05)


def gate_settle(until: float) -> None:
    """Wait until ``until`` (from ``gate_close``): past it, no process answers from
    a memory of the closed sale."""
    time.sleep(max(until - time.monotonic(), 0.0))


def _ms(epoch: float | None) -> str:
    return "" if epoch is None else str(round(epoch * 1000))


def _chunks(mapping: Mapping[str, str | int], size: int = 1000) -> Iterator[dict[FieldT, EncodableT]]:
    items = list(mapping.items())
    for start in range(0, len(items), size):
        yield dict(items[start:start + size])


# --- the gate's sales outside a reset ---------------------------------------------------


def gate_warm(*, sku: str) -> GateSale:
    """Open a gate sale of what the database has left of ``sku``, with its orders'
    keys (so their replays are answered): after Redis lost the sale (a restart
    without its AOF). What Redis accepted and no persister wrote is lost with it;
    anything still in the stream must be written first.

    :raises NotFound: no such product.
    :raises InvalidInput: not a gate product, or Redis still holds its sale.
    :raises Unavailable: the gate's Redis cannot be reached.
    """
    # Processes may remember the lost sale sold out: none does after this answer.
    settled = time.monotonic() + settings.FLASHSALE_GATE_SOLD_OUT_MEMORY_S
    segments = segments_get(sku=sku)
    strategy = strategy_of(segments[0].product.strategy)
    if not strategy.gated:
        raise InvalidInput(f"{sku} sells under {strategy.name}: it does not sell through the gate")
    if len(segments) > 1:
        raise InvalidInput(f"{sku} has {len(segments)} stock segments: reset it under the gate instead")
    if gate_tally(sku=sku) is not None:
        raise InvalidInput(f"Redis holds a sale of {sku} already: reset the product to start over")
    product = segments[0].product
    with transaction.atomic():  # one snapshot: the stock loaded and the orders taken over
        orders = orders_loaded(product)
        stock = Stock.objects.get(product=product, segment=0).quantity
        sale = GateSale.objects.create(product=product, loaded_stock=stock)
    gate_open(sale=sale, window=SaleWindow.of(product), orders=orders)
    gate_settle(settled)
    return sale


def gate_leave(*, within: float) -> list[str]:
    """Hand the gate's sales of the products that follow the deployment's strategy
    (their own is "") to the database, once the default left the gate and no instance
    sells under it: each sale, once the persisters have written every order it
    accepted, is closed in Redis. The database's stock is then the sale's whole
    truth, which the next strategy sells from; a gate sale left open would sell again
    what that strategy sold, were the default to come back to the gate. Such a sale
    answers 503 until reset, or warmed up (``gate_warm``). Returns their skus.

    :raises Busy: a sale not written within ``within`` seconds, or with dead letters
        (an operator's, ``manage.py gate_redrive``): nothing closed.
    :raises Unavailable: the gate's Redis cannot be reached.
    """
    listed = gate_listed()
    # A product gone has no sale anybody sells.
    following = set(Product.objects.filter(sku__in=listed, strategy="").values_list("sku", flat=True))
    skus = [sku for sku in listed if sku in following]
    try:
        gate_written(skus=skus, within=within)
    except Busy as e:
        raise Busy(f"the gate's sales are not handed to the database, {e.message}") from e
    for sku in skus:
        gate_close(sku=sku, required=True)
    return skus
