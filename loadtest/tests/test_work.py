"""The load tools' client does the work a door asks: a new buyer and a room's place,
each sent again with a solved challenge, against the apps in a live server."""

import pytest
from django.test import override_settings

from loadtest.client import FlashsaleClient, SignedUpBuyers
from orders.reset import sale_reset
from waitingroom.services import RoomTerms

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_buyer_and_a_place_are_had_with_the_work_they_cost(live_server):
    with override_settings(FLASHSALE_SIGN_UP_CHALLENGE_BITS=10, FLASHSALE_BUYER_AUTH=True):
        tokens = SignedUpBuyers(live_server.url)
        assert tokens["ann"]  # signed up with a solution
        sale_reset(sku="work-1", stock=5, strategy="atomic",
                   room=RoomTerms.given(rate=100, challenge_bits=10))
        client = FlashsaleClient(live_server.url, tokens=tokens)
        place = client.room("work-1", "ann")
        assert place.status_code == 200 and place.json()["position"] == 1
        assert client.room("work-1", "ann").json()["position"] == 1  # asked again: no more work
