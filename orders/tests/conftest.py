"""The orders' tests name the buyer in the body (``FLASHSALE_BUYER_AUTH`` off): they
test the purchase path behind the authentication. The authentication itself is
``test_buyer_auth.py``'s (which turns it on), and the suite's stack runs with it on,
as it is by default, under every test that buys through nginx."""

import pytest


@pytest.fixture(autouse=True)
def _buyer_in_the_body(settings):
    settings.FLASHSALE_BUYER_AUTH = False
