"""Reads of the waiting room's durable half."""

from inventory.models import Product

from . import store
from .models import Room
from .store import RoomCounts


def room_of(*, product: Product) -> bool:
    """Whether ``product``'s sale has a waiting room (its row: the sale's state in
    Redis says so without a query, while it is there)."""
    return Room.objects.filter(product=product).exists()


def room_counts(*, sku: str) -> RoomCounts:
    """``sku``'s room: places waiting, admissions running, admissions given.

    :raises redis.RedisError: the gate's Redis cannot be reached.
    """
    return store.room_counts(sku=sku)
