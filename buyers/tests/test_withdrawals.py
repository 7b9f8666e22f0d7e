"""A buyer deactivated or deleted: its tokens refused at the next purchase, on the
real Redis, without a database read; tokens issued after it is made active again
buy. With the cache's Redis away, the change is refused (503) and nothing changes."""

import time

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.test import APIClient

from buyers import withdrawals
from buyers.tokens import TokenRefused, token_buyer, token_issue
from common.errors import Unavailable
from stack.scratch import free_port

pytestmark = pytest.mark.django_db


def bought(token: str) -> int:
    """A purchase's status with ``token``: 404, no such product, once authenticated."""
    return APIClient().post("/api/orders", {"sku": "nothing-here", "quantity": 1}, format="json",
                            HTTP_AUTHORIZATION=f"Bearer {token}").status_code


def test_a_deactivated_buyers_tokens_are_refused_at_its_next_purchase():
    ann = get_user_model().objects.create_user("ann", password="a long passphrase")
    token = token_issue(username="ann", now=time.time() - 5).token  # issued a while ago
    assert bought(token) == 404
    ann.is_active = False
    ann.save()
    assert bought(token) == 401
    ann.is_active = True
    ann.save()
    assert bought(token) == 401  # issued before: withdrawn for good
    # Signed in again (a second later: a token counts whole seconds).
    assert bought(token_issue(username="ann", now=time.time() + 1).token) == 404


def test_a_deleted_buyers_tokens_are_refused():
    bob = get_user_model().objects.create_user("bob")
    token = token_issue(username="bob", now=time.time() - 5).token
    bob.delete()
    with pytest.raises(TokenRefused, match="withdrawn"):
        token_buyer(token)


def test_the_check_reads_no_row_and_redis_once_a_period(django_assert_num_queries, monkeypatch, settings):
    settings.FLASHSALE_BUYER_WITHDRAWN_REFRESH_S = 60
    monkeypatch.setattr(withdrawals, "_read_at", float("-inf"))
    reads = []
    real = withdrawals._redis
    monkeypatch.setattr(withdrawals, "_redis", lambda: reads.append(1) or real())
    token = token_issue(username="cat").token
    with django_assert_num_queries(0):
        assert [token_buyer(token) for _ in range(100)] == ["cat"] * 100
    assert len(reads) == 1
    withdrawals.buyer_withdraw(username="cat")  # this process knows at once; others within the period
    with pytest.raises(TokenRefused):
        token_buyer(token)


def cache_away():
    """The shared cache pointed at a port nothing listens on: the real client, refused."""
    nowhere = {"default": {**settings.CACHES["default"], "LOCATION": f"redis://127.0.0.1:{free_port()}/0"}}
    return override_settings(CACHES={**settings.CACHES, **nowhere})


def test_a_deactivation_with_the_cache_away_is_refused_and_changes_nothing():
    dee = get_user_model().objects.create_user("dee")
    dee.is_active = False
    with cache_away(), pytest.raises(Unavailable, match="dee is not deactivated"):
        dee.save()
    assert get_user_model().objects.get(username="dee").is_active


def test_a_deletion_in_the_admin_with_the_cache_away_answers_503_and_deletes_nothing(client):
    staff = get_user_model().objects.create_superuser("root", password="a long passphrase")
    eve = get_user_model().objects.create_user("eve")
    client.force_login(staff)
    with cache_away():
        response = client.post(f"/admin/auth/user/{eve.pk}/delete/", {"post": "yes"})
    assert response.status_code == 503
    assert response.json()["error"] == "unavailable"
    assert get_user_model().objects.filter(username="eve").exists()
    response = client.post(f"/admin/auth/user/{eve.pk}/delete/", {"post": "yes"})  # the cache back
    assert response.status_code == 302 and not get_user_model().objects.filter(username="eve").exists()
