"""The per-user limit: how many units of one product one buyer may buy."""

from __future__ import annotations

from django.conf import settings
from django.db.models import F

from common.errors import LimitReached
from inventory.models import Product

from .models import BuyerQuota


def quota_open(*, product: Product, user_id: str) -> None:
    """Create the buyer's row, in autocommit before the purchase's transaction: an
    INSERT inside it would leave every concurrent purchase of the same buyer holding
    a shared lock on the new row, each then waiting for the others' to upgrade it
    (a deadlock InnoDB breaks by rolling purchases back)."""
    if settings.FLASHSALE_PER_USER_LIMIT:
        BuyerQuota.objects.bulk_create([BuyerQuota(product=product, user_id=user_id)], ignore_conflicts=True)


def quota_take(*, product: Product, user_id: str, quantity: int) -> None:
    """Count ``quantity`` against the buyer's limit, inside the purchase's transaction
    (its rollback gives the units back): one conditional UPDATE of the row
    ``quota_open`` made, which matches only while the limit leaves room and holds the
    row until the commit, so two purchases of one buyer cannot both pass, whatever
    the strategy.

    :raises LimitReached: the buyer has no room left for ``quantity``.
    """
    limit = settings.FLASHSALE_PER_USER_LIMIT
    if not limit:
        return
    room = BuyerQuota.objects.filter(product=product, user_id=user_id, bought__lte=limit - quantity)
    if not room.update(bought=F("bought") + quantity):
        raise LimitReached.of(product.sku, user_id, limit)


def quota_free(*, product: Product, units: dict[str, int]) -> None:
    """Give each buyer's limit back the units of their orders that went back to the
    sale (expired, refunded): a buyer whose order expired may buy again. Buyers in
    sorted order, so two batches that share buyers take their rows in one order."""
    for user_id in sorted(units):
        (BuyerQuota.objects.filter(product=product, user_id=user_id, bought__gte=units[user_id])
         .update(bought=F("bought") - units[user_id]))
