"""Reads of the waiting room's durable half."""

from inventory.models import Product

from .models import Room


def room_of(*, product: Product) -> bool:
    """Whether ``product``'s sale has a waiting room (its row: the sale's state in
    Redis says so without a query, while it is there)."""
    return Room.objects.filter(product=product).exists()
