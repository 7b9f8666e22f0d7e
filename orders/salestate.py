"""The sale's state: three Redis keys per product, that answer these questions before
any lock or transaction.

- **Sold out?** Once the product's stock reaches 0 the state says so, and later
  purchases are answered 409 from Redis alone. A flash sale spends most of its
  requests after the stock is gone; this keeps them cheap. Stock comes back when an
  unpaid order expires (``payments``): each return counts itself in the state before
  it commits and again after, and a sold-out mark holds only while the count is the
  one its writer read before it found the stock empty. Before: once the returned
  units can be seen, no mark from before the return holds. After: a purchase that
  found the stock empty just before the return committed marks the sale sold out
  after the return cleared it; its mark names a count before the second, so it says
  nothing.
- **Is the sale open, and under which strategy?** The reset writes the sale's
  window and the product's own strategy with its opening, so a purchase before the
  start or after the end is refused, and the others take their product's path,
  without a query. The state names the sale it describes (``Product.sale``): a
  purchase trusts it only for the rows of that sale. The reset writes the new state
  just before its commit, so a purchase may read it with the old sale's rows (read
  before the commit, or remembered): it judges those rows by their own terms, and
  the deduction, which takes only from them, finds them gone.
- **Do the idempotency flags vouch for every order of this sale?** A request that
  claimed its key afresh may be refused (sold out, busy) without asking the
  database whether its key already has an order only if every order of the sale left
  a flag that is still there. The state is how Redis tells: the reset writes when the
  sale opened, before its first order, so that key is older than every flag of the
  sale, and whatever loses the flags (a restart without persistence, a flush) loses
  it with them; nothing but the next reset writes it again.
  A flag's TTL is the other way to lose one: the state vouches only while the sale is
  younger than that TTL. Redis evicts nothing here (no ``maxmemory``); with an
  eviction policy, the flags could go without the state.

The answers only save work: without the state (Redis down or restarted, fast path
off) a purchase finds the stock empty the slow way, reads the window from the
product's row, and a refused keyed request looks its key up in the database.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from prometheus_client import Counter

from common.cache_errors import CACHE_ERRORS
from common.metrics import count

from .idempotency import flags_unwritten
from .window import SaleWindow

logger = logging.getLogger(__name__)

SOLD_OUT = Counter("flashsale_sales_sold_out", "Sales sold out (their last unit sold), by strategy; "
                   "the gate's are its Redis's own", ["strategy"])


@dataclass(frozen=True)
class Opening:
    """What the reset wrote with the sale's opening, one key."""

    at: float  # when (epoch seconds)
    window: SaleWindow
    strategy: str  # the product's own strategy ("": the deployment's)
    room: bool  # the sale has a waiting room: its purchases need an admission (waitingroom)
    sale: int  # the sale it describes (Product.sale)


@dataclass(frozen=True)
class SaleState:
    sold_out: bool
    # The opening as the reset wrote it; None when the state was lost, or Redis could
    # not be read: then the flags vouch for nothing, and the product's row says.
    opening: Opening | None
    # Returns of stock to the sale so far (``sale_state_returned``): what a sold-out
    # mark written now must name.
    returns: int = 0

    @property
    def flags_complete(self) -> bool:
        """Every order of this sale has its flag in Redis: a key claimed afresh has none."""
        return (self.opening is not None and not flags_unwritten()
                and time.time() - self.opening.at < settings.FLASHSALE_IDEMPOTENCY_TTL_S)


LOST = SaleState(sold_out=False, opening=None)


# Three keys, read in one MGET: the reset alone writes "opened", so nothing written
# after a loss (a purchase that read the state before it, a sold-out state) can make
# the state vouch again for flags lost with it.
def _opened_key(sku: str) -> str:
    return f"sale:{sku}:opened"


def _sold_out_key(sku: str) -> str:
    return f"sale:{sku}:sold-out"


# Never deleted, not even by a reset: a count that went back could make an old mark
# hold again.
def _returns_key(sku: str) -> str:
    return f"sale:{sku}:returns"


def sale_state_get(*, sku: str) -> SaleState:
    opened_key, sold_out_key, returns_key = _opened_key(sku), _sold_out_key(sku), _returns_key(sku)
    try:
        values = cache.get_many([opened_key, sold_out_key, returns_key])
    except CACHE_ERRORS as e:
        logger.warning("sale state unreadable, taking the slow path: %s", e)
        return LOST
    state = values.get(opened_key)
    # A state in another shape (written before the sale's number rode with it) vouches
    # for nothing, and says nothing.
    opening = Opening(*state) if isinstance(state, tuple) and len(state) == 5 else None
    returns = values.get(returns_key, 0)
    # A mark names the sale it is of: with a state, it must be the state's (a purchase
    # of the sale before a reset may land its mark after the reset cleared it).
    mark = values.get(sold_out_key)
    sold_out = (isinstance(mark, tuple) and mark[1] == returns
                and (opening is None or mark[0] == opening.sale) and settings.FLASHSALE_SOLD_OUT_FAST_PATH)
    return SaleState(sold_out=sold_out, opening=opening, returns=returns)


def sale_state_open(*, sku: str, sale: int, window: SaleWindow, strategy: str, room: bool = False) -> bool:
    """The reset opens the sale numbered ``sale``: before its first order, so the state
    is older than every flag of the sale. The window, the product's own strategy ("":
    the deployment's) and whether it has a waiting room ride with it: one key, one
    write. False: Redis could not be written (the old state, if any, names the old
    sale, so no purchase trusts it for the new one)."""
    try:
        cache.delete(_sold_out_key(sku))
        cache.set(_opened_key(sku), (time.time(), window, strategy, room, sale), timeout=None)
    except CACHE_ERRORS as e:
        logger.warning("could not write the sale state of %s: %s", sku, e)
        return False
    return True


def sale_state_forget(*, sku: str) -> None:
    """Drop ``sku``'s state (a reset that failed may have written one for a sale that
    did not commit): purchases read the rows until the next reset writes it."""
    try:
        cache.delete(_opened_key(sku))
    except CACHE_ERRORS as e:
        logger.warning("could not drop the sale state of %s: %s", sku, e)


def sale_state_sold_out(*, sku: str, strategy: str, sale: int, returns: int) -> None:
    """State ``sku``'s sale numbered ``sale`` sold out, until it is reset or stock
    returns: ``returns`` is the state's count of returns as read before the stock was
    found empty. The first to say so counts the sale's sold-out moment for /metrics."""
    key, mark = _sold_out_key(sku), (sale, returns)
    try:
        first = cache.add(key, mark, timeout=None)
        if not first and cache.get(key) != mark:
            cache.set(key, mark, timeout=None)  # sold out again after a return
    except CACHE_ERRORS as e:
        logger.warning("could not state %s sold out: %s", sku, e)
        return
    if first:
        count(SOLD_OUT, strategy)


def sale_state_returned(*, sku: str) -> bool:
    """Count a return of stock to ``sku``'s sale (before its commit, and after): every
    sold-out mark written before it says nothing from now on. False: Redis could not be
    written, and a mark may still say sold out; the caller tries again."""
    key = _returns_key(sku)
    try:
        cache.add(key, 0, timeout=None)
        cache.incr(key)
    except CACHE_ERRORS as e:
        logger.warning("could not count a return of stock to %s: %s", sku, e)
        return False
    return True
