"""The payment step's tests buy in process, the buyer named in the body (as the
orders' tests do): what they test is behind the authentication."""

import pytest


@pytest.fixture(autouse=True)
def _buyer_in_the_body(settings):
    settings.FLASHSALE_BUYER_AUTH = False
