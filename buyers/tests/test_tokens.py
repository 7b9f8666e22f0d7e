"""Buyers' tokens: what they name, and every way one is refused."""

import jwt
import pytest
from django.test import override_settings

from buyers.tokens import ALGORITHM, AUDIENCE, TokenRefused, _key, token_buyer, token_issue


def test_a_token_names_its_buyer_until_it_expires():
    issued = token_issue(username="alice", seconds=60)
    assert token_buyer(issued.token) == "alice"
    stale = token_issue(username="alice", seconds=60, now=0)  # expired in 1970
    with pytest.raises(TokenRefused, match="expired"):
        token_buyer(stale.token)


@pytest.mark.parametrize("claims", [
    {"sub": "alice", "aud": "someone-else", "iat": 0, "exp": 4_000_000_000},  # not a buyer's
    {"sub": "alice", "aud": AUDIENCE, "iat": 0},  # never expires
    {"sub": "", "aud": AUDIENCE, "iat": 0, "exp": 4_000_000_000},  # names nobody
    {"sub": 7, "aud": AUDIENCE, "iat": 0, "exp": 4_000_000_000},  # not a name
], ids=["audience", "no-expiry", "empty", "number"])
def test_a_token_with_the_right_key_but_the_wrong_claims_is_refused(claims):
    with pytest.raises(TokenRefused):
        token_buyer(jwt.encode(claims, _key(), algorithm=ALGORITHM))


def test_a_forged_or_altered_token_is_refused():
    good = token_issue(username="alice").token
    forged = jwt.encode({"sub": "alice", "aud": AUDIENCE, "iat": 0, "exp": 4_000_000_000}, b"guessed",
                        algorithm=ALGORITHM)
    unsigned = jwt.encode({"sub": "alice", "aud": AUDIENCE, "iat": 0, "exp": 4_000_000_000}, None,
                          algorithm="none")
    head, body, signature = good.split(".")
    for token in (forged, unsigned, f"{head}.{body}.{signature[:-2]}xx", "not a token", ""):
        with pytest.raises(TokenRefused):
            token_buyer(token)


def test_a_token_of_another_key_is_refused():
    with override_settings(FLASHSALE_BUYER_TOKEN_KEY="one key"):
        token = token_issue(username="alice").token
        assert token_buyer(token) == "alice"
    with override_settings(FLASHSALE_BUYER_TOKEN_KEY="another key"), pytest.raises(TokenRefused):
        token_buyer(token)


def test_a_token_checked_once_is_refused_once_it_expires(monkeypatch):
    issued = token_issue(username="alice", seconds=60)
    assert token_buyer(issued.token) == "alice"  # its signature checked, and kept
    monkeypatch.setattr("buyers.tokens.time.time", lambda: issued.expires_at + 10)
    with pytest.raises(TokenRefused, match="expired"):
        token_buyer(issued.token)
