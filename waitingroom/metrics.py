"""The waiting room's metrics (no labels but a refusal's reason: never a sku or a buyer)."""

from collections.abc import Iterator
from datetime import timedelta

from django.utils import timezone
from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily

from .models import Room
from .store import room_counts

PLACES = Counter("flashsale_room_places", "Places taken in sales' waiting rooms (a buyer that asks "
                 "again after its admission ran out, or its place was skipped, takes a new one)")
ADMISSIONS = Counter("flashsale_room_admissions", "Places admitted by sales' waiting rooms")
# Every ask, a place's first and each later one: the room moves on as buyers ask, so
# asks with no admission among them is a room that stalled (FlashsaleRoomStalled).
ASKS = Counter("flashsale_room_asks", "Asks for a place in sales' waiting rooms, answered (a place's first "
               "ask and each later one)")
SKIPPED = Counter("flashsale_room_skipped", "Places skipped at their turn: their holder stopped asking")
REFUSED = Counter("flashsale_room_refused", "Purchases refused for want of an admission that buys, by "
                  "reason", ["reason"])


# A room is watched for an hour after its sale's reset, as the live sales are.
WATCHED_S = 3600


class RoomCollector:
    """The waiting rooms' gauges: places waiting, and admissions running, summed over the
    rooms of the sales reset in the last hour; none while a server cannot be reached
    (``flashsale_collector_up{collector="rooms"}`` says so)."""

    name = "rooms"

    def collect(self) -> Iterator[GaugeMetricFamily]:
        waiting, active = rooms_counted()
        yield GaugeMetricFamily("flashsale_room_waiting", "Places waiting in the live sales' waiting rooms "
                                "(abandoned ones not yet skipped included)", value=waiting)
        yield GaugeMetricFamily("flashsale_room_active", "Admissions running in the live sales' waiting "
                                "rooms: admitted, not yet bought, not run out", value=active)


def rooms_counted() -> tuple[int, int]:
    since = timezone.now() - timedelta(seconds=WATCHED_S)
    waiting = active = 0
    for sku in Room.objects.filter(opened_at__gte=since).values_list("product__sku", flat=True):
        counts = room_counts(sku=sku)
        waiting, active = waiting + counts.waiting, active + counts.active
    return waiting, active
