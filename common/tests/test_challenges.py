"""Proof of work on the real Redis: a solved challenge passes once, for its purpose
and difficulty, before its end; anything else is refused with why."""

import hashlib

import pytest
from itsdangerous import URLSafeSerializer

from common.challenges import challenge_issue, challenge_solve, challenge_verify, zero_bits
from common.errors import ChallengeRefused

pytestmark = pytest.mark.django_db  # the shared cache, cleared for each test

BITS = 8


def reason(solution, purpose="sign-up", bits=BITS) -> str:
    with pytest.raises(ChallengeRefused) as refused:
        challenge_verify(solution=solution, purpose=purpose, bits=bits)
    return refused.value.extra["reason"]


def test_zero_bits_counts_the_leading_zeros():
    assert [zero_bits(b) for b in (b"\x80", b"\x01", b"\x00\x10", b"\x00\x00")] == [0, 7, 11, 16]


def test_a_solution_passes_once_and_only_for_its_purpose_and_difficulty():
    solved = challenge_solve(challenge_issue(purpose="sign-up", bits=BITS).token, BITS)
    assert zero_bits(hashlib.sha256(solved.encode()).digest()) >= BITS
    assert reason(solved, purpose="room:sku-1") == "other_purpose"
    assert reason(solved, bits=BITS + 1) == "too_easy"  # the door asks more now
    challenge_verify(solution=solved, purpose="sign-up", bits=BITS)
    assert reason(solved) == "used"
    challenge_verify(solution=None, purpose="sign-up", bits=0)  # nothing asked, nothing checked


def test_what_does_not_hold_is_refused_with_why(settings):
    token = challenge_issue(purpose="sign-up", bits=BITS).token
    solved = challenge_solve(token, BITS)
    nonce = int(solved.rpartition(":")[2])
    unsolved = next(f"{token}:{n}" for n in range(nonce + 1, nonce + 100_000)
                    if zero_bits(hashlib.sha256(f"{token}:{n}".encode()).digest()) < BITS)
    forged = URLSafeSerializer("guessed", salt="flashsale.challenges").dumps(["sign-up", 0, 2**40, "x"])
    given = (None, "", "no colon", f"{forged}:1", f"{token[:-2]}xx:{nonce}", unsolved)
    assert [reason(s) for s in given] == ["missing", "missing", "missing", "invalid", "invalid", "unsolved"]
    settings.FLASHSALE_CHALLENGE_TTL_S = -1
    stale = challenge_issue(purpose="sign-up", bits=BITS).token
    assert reason(challenge_solve(stale, BITS)) == "expired"


def test_a_verification_reads_no_row(django_assert_num_queries):
    solutions = [challenge_solve(challenge_issue(purpose="sign-up", bits=4).token, 4) for _ in range(20)]
    with django_assert_num_queries(0):
        for solution in solutions:
            challenge_verify(solution=solution, purpose="sign-up", bits=4)

