"""The sale's mark: one Redis key per product, written by the reset, that answers two
questions before any lock or transaction.

- **Sold out?** Once the product's stock reaches 0 the mark says so, and later
  purchases are answered 409 from Redis alone. A flash sale spends most of its
  requests after the stock is gone; this keeps them cheap.
- **Do the idempotency flags vouch for every order of this sale?** A request that
  claimed its key afresh may be refused (sold out, busy) without asking the
  database whether its key already has an order only if every order of the sale left
  a flag that is still there. The mark is how Redis tells: the reset writes it before
  the sale's first order, so it is older than every flag of the sale, and whatever
  loses the flags (a restart without persistence, a flush) loses the mark with them.
  A flag's TTL is the other way to lose one: the mark vouches only while the sale is
  younger than that TTL. Redis evicts nothing here (no ``maxmemory``); with an
  eviction policy, the flags could go without the mark.

Both answers only save work: without the mark (Redis down or restarted, fast path
off) a purchase finds the stock empty the slow way, and a refused keyed request
looks its key up in the database.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from .cache_errors import CACHE_ERRORS
from .idempotency import flags_owed

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SaleMark:
    sold_out: bool
    # When the reset wrote the mark (epoch seconds); None when the mark was lost, or
    # Redis could not be read: then the flags vouch for nothing.
    opened: float | None

    @property
    def flags_complete(self) -> bool:
        """Every order of this sale has its flag in Redis: a key claimed afresh has none."""
        return (self.opened is not None and not flags_owed()
                and time.time() - self.opened < settings.FLASHSALE_IDEMPOTENCY_TTL)


LOST = SaleMark(sold_out=False, opened=None)


def _key(sku: str) -> str:
    return f"sale:{sku}"


def sale_mark_get(*, sku: str) -> SaleMark:
    try:
        value = cache.get(_key(sku))
    except CACHE_ERRORS as e:
        logger.warning("sale mark unreadable, taking the slow path: %s", e)
        return LOST
    if value is None:
        return LOST
    return SaleMark(sold_out=value["sold_out"] and settings.FLASHSALE_SOLDOUT_FAST_PATH,
                    opened=value["opened"])


def sale_mark_open(*, sku: str) -> None:
    """The reset opens the sale: before its first order, so the mark is older than
    every flag of the sale."""
    try:
        cache.set(_key(sku), {"opened": time.time(), "sold_out": False}, timeout=None)
    except CACHE_ERRORS as e:
        logger.warning("could not write the sale mark of %s: %s", sku, e)


def sale_mark_sold_out(*, sku: str, seen: SaleMark) -> None:
    """Mark the sale sold out, keeping what the mark ``seen`` at the purchase's start
    said about the flags. A mark seen, but lost since, is not written back (SET XX):
    written back, it would vouch for flags lost with it. A mark seen lost is written
    as vouching for nothing (SET NX)."""
    value = {"opened": seen.opened, "sold_out": True}
    try:
        cache.set(_key(sku), value, timeout=None, nx=seen.opened is None, xx=seen.opened is not None)
    except CACHE_ERRORS as e:
        logger.warning("could not mark %s sold out: %s", sku, e)

