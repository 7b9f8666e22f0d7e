"""The sale window: when a product's sale opens and closes. The reset sets it; the
purchase checks it before any lock or transaction, from the sale's state in Redis
(``orders.salestate``) and so without a database query, or under the gate inside its
script (``orders.gate.lifecycle``), on Redis' clock."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from common.errors import Ended, NotStarted
from inventory.models import Product


@dataclass(frozen=True)
class SaleWindow:
    """Epoch seconds; None: open from the reset (``starts_at``), never closes (``ends_at``)."""

    starts_at: float | None = None
    ends_at: float | None = None

    @classmethod
    def of(cls, product: Product) -> SaleWindow:
        return cls(starts_at=product.starts_at.timestamp() if product.starts_at else None,
                   ends_at=product.ends_at.timestamp() if product.ends_at else None)

    def check(self, *, sku: str, now: float) -> None:
        """:raises Ended: from ``ends_at`` on, and always when it is not after ``starts_at``
            (a window that never opens).
        :raises NotStarted: before ``starts_at`` (Retry-After: the seconds left, rounded up)."""
        if self.ends_at is not None and (
                now >= self.ends_at or self.starts_at is not None and self.ends_at <= self.starts_at):
            raise ended(sku=sku, ends_at=self.ends_at)
        if self.starts_at is not None and now < self.starts_at:
            raise not_started(sku=sku, starts_at=self.starts_at, now=now)


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def not_started(*, sku: str, starts_at: float, now: float) -> NotStarted:
    return NotStarted(f"{sku}: the sale opens at {iso(starts_at)}", extra={"starts_at": iso(starts_at)},
                      retry_after=max(math.ceil(starts_at - now), 1))


def ended(*, sku: str, ends_at: float) -> Ended:
    return Ended(f"{sku}: the sale closed at {iso(ends_at)}", extra={"ends_at": iso(ends_at)})
