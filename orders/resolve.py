"""The purchase's one decision: which strategy the product's sale runs under
(``strategy_resolve``: the sale's state in Redis, else the product's row),
remembered per process for ``FLASHSALE_STRATEGY_MEMORY_S``; and the refusal of a
purchase whose seller found the sale reset under another strategy meanwhile."""

from __future__ import annotations

import time

from django.conf import settings

from common.errors import Busy
from common.memory import ProcessMemory
from common.strategies import StrategySpec, strategy_of
from inventory.models import Stock
from inventory.selectors import segments_get

from .salestate import sale_state_get

# sku -> the strategy its sale runs under, for FLASHSALE_STRATEGY_MEMORY_S seconds
# from the read: a reset that changes a product's strategy waits that long before
# it answers (orders.reset), so that no process resolves the old one after it.
_strategies: ProcessMemory[str, StrategySpec] = ProcessMemory(
    "each product's strategy", seconds=lambda: settings.FLASHSALE_STRATEGY_MEMORY_S)


def strategy_resolve(sku: str) -> tuple[StrategySpec, list[Stock] | None]:
    """The strategy the product's sale runs under: from the sale's state in Redis,
    which the reset writes, else (the state lost) from the product's row.
    Remembered for a while (``_strategies``): without it, every purchase would
    ask Redis first, one round trip more than the gate's one.

    :returns: the strategy, and the product's segments when the row was read for
        it (with its product: the plan's read, which the seller need not repeat).
    :raises NotFound: no such product (not remembered: the next purchase asks again).
    """
    known = _strategies.get(sku)
    if known is not None:
        return known, None
    read = time.monotonic()
    state = sale_state_get(sku=sku)
    segments: list[Stock] | None = None
    if state.opening is not None:
        strategy = strategy_of(state.opening.strategy)
    else:
        segments = segments_get(sku=sku)
        strategy = strategy_of(segments[0].product.strategy)
    _strategies.put(sku, strategy, since=read)
    return strategy, segments


def strategy_remembered(sku: str) -> str | None:
    """``sku``'s strategy as this process last resolved it, asking nobody (None: never,
    or forgotten): a refusal's metrics label. Past the memory too: a purchase that
    resolved it and then waited longer for a lock is answered under that strategy."""
    known = _strategies.last(sku)
    return None if known is None else known.name


def strategy_confirmed(sku: str, found: str, resolved: StrategySpec) -> None:
    """Check that the sale still runs under the strategy the purchase resolved:
    ``found`` is the product's own as the seller read it (its row, or the sale's
    state; "": the deployment's).

    :raises Busy: a reset changed it during this purchase (one that answered earlier
        waited out every memory); nothing was written.
    """
    if strategy_of(found) != resolved:
        raise reset_meanwhile_error(sku, found, resolved)


def reset_meanwhile_error(sku: str, found: str, resolved: StrategySpec) -> Busy:
    """The seller found another strategy's sale: a reset changed it during this
    purchase. Nothing written."""
    _strategies.pop(sku)
    return Busy(f"{sku} was reset under another strategy during the purchase; nothing was written",
                extra={"strategy": strategy_of(found).name, "resolved": resolved.name})
