"""The shop page's buyers, with Django's test client on the real MariaDB: continue as
a new buyer, sign up, sign in and out, each signing the browser's session in, and
the shop page buying as that buyer."""

import json
import random
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from orders.models import Order
from orders.reset import sale_reset

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def signed_in():
    with override_settings(FLASHSALE_BUYER_AUTH=True, FLASHSALE_THROTTLE_SIGN_UP="",
                           FLASHSALE_THROTTLE_USER="", FLASHSALE_THROTTLE_ADDRESS=""):
        yield


def buyer_on_the_page(browser: Client) -> str | None:
    page = browser.get("/?sku=page-1").content.decode()
    found = re.search(r'<script id="buyer-data"[^>]*>(.*?)</script>', page)
    assert found, page
    return json.loads(found.group(1))


def test_continue_as_a_new_buyer_signs_in_one_click_and_buys_with_the_session_and_its_csrf_token():
    sale_reset(sku="page-1", stock=3, strategy="atomic")
    browser = Client(enforce_csrf_checks=True)
    page = browser.get("/?sku=page-1")
    assert 'id="new-buyer"' in page.content.decode() and buyer_on_the_page(browser) is None
    csrf = browser.cookies["csrftoken"].value
    made = browser.post("/buyers/new", {"next": "/?sku=page-1", "csrfmiddlewaretoken": csrf})
    assert made.status_code == 302 and made["Location"] == "/?sku=page-1"
    buyer = buyer_on_the_page(browser)
    assert buyer.startswith("buyer-")
    bought = browser.post("/api/orders", {"sku": "page-1", "quantity": 1}, content_type="application/json",
                          HTTP_X_CSRFTOKEN=browser.cookies["csrftoken"].value)
    assert bought.status_code == 201 and Order.objects.get().user_id == buyer


def test_a_buyer_signs_up_then_out_then_in_again():
    browser = Client()
    refused = browser.post("/buyers/sign-up", {"username": "dora", "password": "short"})
    assert refused.status_code == 400 and "password" in refused.content.decode()
    signed_up = browser.post("/buyers/sign-up", {"username": "dora", "password": "a long passphrase"})
    assert signed_up.status_code == 302
    assert buyer_on_the_page(browser) == "dora"
    assert browser.post("/buyers/sign-out").status_code == 302
    assert buyer_on_the_page(browser) is None
    wrong = browser.post("/buyers/sign-in", {"username": "dora", "password": "not hers at all"})
    assert wrong.status_code == 200 and 'id="error"' in wrong.content.decode()
    signed_in = browser.post("/buyers/sign-in", {"username": "dora", "password": "a long passphrase"})
    assert signed_in.status_code == 302
    assert buyer_on_the_page(browser) == "dora"


def test_going_back_stays_on_this_site():
    browser = Client()
    made = browser.post("/buyers/new", {"next": "https://elsewhere.example/"})
    assert made["Location"] == "/"
    assert get_user_model().objects.count() == 1


def test_new_buyers_from_the_page_are_throttled_per_address():
    address = f"10.77.{random.randrange(256)}.{random.randrange(256)}"  # counted afresh each run
    with override_settings(FLASHSALE_THROTTLE_SIGN_UP="1/m"):
        first, second = Client(REMOTE_ADDR=address).post("/buyers/new"), Client(REMOTE_ADDR=address).post(
            "/buyers/new")
    assert (first.status_code, second.status_code) == (302, 429)


def test_when_new_buyers_cost_work_the_page_sends_its_solution(settings):
    from common.challenges import challenge_solve

    settings.FLASHSALE_SIGN_UP_CHALLENGE_BITS = 8
    browser = Client()
    refused = browser.post("/buyers/new")
    assert refused.status_code == 403 and refused.json()["reason"] == "missing"
    challenge = browser.post("/api/buyers/challenge").json()
    solved = challenge_solve(challenge["challenge"], challenge["bits"])
    assert browser.post("/buyers/new", {"challenge_solution": solved}).status_code == 302
    form = browser.post("/buyers/sign-up", {"username": "erin", "password": "a long passphrase",
                                            "challenge_solution": solved})  # used already
    assert form.status_code == 403 and b"used" in form.content
