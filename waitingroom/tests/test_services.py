"""The waiting room on the real Redis and MariaDB: places that stay theirs, admissions
in order up to the active bound, abandoned places skipped, unused admissions freeing
their slots, and tokens that buy once, for their buyer and sale only."""

import base64
import hashlib
import json
import time
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone
from itsdangerous import Signer
from prometheus_client import REGISTRY

from common.challenges import challenge_issue, challenge_solve
from common.errors import AdmissionRefused, ChallengeRefused, NotFound, PlacesBounded
from common.gateredis import gate_redis
from orders.purchase import order_create
from orders.reset import sale_reset
from waitingroom.metrics import RoomCollector
from waitingroom.services import RoomTerms, admission_checked, admission_spend, place_ask, room_purpose
from waitingroom.store import ask_interval_ms, room_counts, room_join_many, room_keys
from waitingroom.tokens import LEEWAY_S, admission_read, admission_token

pytestmark = pytest.mark.django_db

# Admissions come as fast as asks find them (credit for a thousand a second), so that
# the active bound decides who is admitted, not the clock.
FAST = RoomTerms(rate=1000, active=2, admission_s=60)
# The sale opens this long after its reset: the asks before it queue, however slow the
# machine, until a test opens it (``moved_on``).
OPENS_IN = 3600


def open_room(sku: str = "r-1", terms: RoomTerms = FAST, opens_in: float = OPENS_IN) -> str:
    sale_reset(sku=sku, stock=10, strategy="atomic", room=terms,
               starts_at=timezone.now() + timedelta(seconds=opens_in))
    return sku


def moved_on(sku: str) -> None:
    """The room's opening moved to now, as if its hour had passed: the next ask has a
    second's credit to admit with (the room's clock is Redis's, so its record moves)."""
    gate_redis().hset(room_keys(sku)["room"], "opens", 0)


def gone(sku: str, buyer: str) -> None:
    """``buyer`` left: the ask the room told it to make was due long ago."""
    gate_redis().hset(room_keys(sku)["asked"], buyer, 0)


def spend(*, sku: str, buyer: str, token: str | None, key: str) -> bool:
    """A purchase's spend, as a seller other than the gate's does it: checked, then spent."""
    checked = admission_checked(sku=sku, buyer=buyer, token=token)
    return admission_spend(sku=sku, buyer=buyer, admission=checked, key=key)


def test_a_place_is_the_same_however_often_and_wherever_it_is_asked():
    sku = open_room(terms=RoomTerms(rate=1, active=1, admission_s=60))
    first = place_ask(sku=sku, buyer="ann", address="10.0.0.1")
    assert (first.state, first.position, first.ahead) == ("waiting", 1, 0)
    second = place_ask(sku=sku, buyer="bob", address="10.0.0.2")
    assert (second.position, second.ahead) == (2, 1)
    assert second.wait_s == 1  # one ahead, one a second
    # A refresh, another tab, another address: the same place.
    assert place_ask(sku=sku, buyer="bob", address="10.0.0.3").position == 2
    assert place_ask(sku=sku, buyer="ann", address="").position == 1


def test_nobody_is_admitted_before_the_sale_opens_and_the_first_come_first_after():
    sku = open_room(terms=RoomTerms(rate=1000, active=1, admission_s=60))
    for buyer in ("ann", "bob"):
        assert place_ask(sku=sku, buyer=buyer).state == "waiting"
    assert place_ask(sku=sku, buyer="ann").state == "waiting"  # a thousand a second, but not open yet
    moved_on(sku)
    assert place_ask(sku=sku, buyer="bob").state == "waiting"  # ann came first
    assert place_ask(sku=sku, buyer="ann").state == "admitted"


def test_a_shuffled_room_admits_the_places_taken_before_the_opening_in_a_random_order_first():
    sku = open_room("r-shuffled", RoomTerms(rate=1000, active=1, admission_s=60, order="shuffled"))
    early = [f"b{n:02}" for n in range(30)]
    assert [place_ask(sku=sku, buyer=b).position for b in early] == list(range(1, 31))
    ahead = {b: place_ask(sku=sku, buyer=b).ahead for b in early}  # every place taken
    assert sorted(ahead.values()) == list(range(30))
    assert sorted(early, key=ahead.get) != early  # the join order: one chance in 30!
    moved_on(sku)
    late = place_ask(sku=sku, buyer="zed")  # and the room moves on: one slot, to the first
    assert (late.position, late.ahead) == (31, 29)  # behind every early place still waiting
    assert place_ask(sku=sku, buyer=min(early, key=ahead.get)).state == "admitted"
    assert place_ask(sku=sku, buyer=max(early, key=ahead.get)).state == "waiting"


def test_a_room_filled_in_bulk_holds_the_places_one_ask_at_a_time_would():
    sku = open_room()
    assert room_join_many(sku=sku, buyers=[f"bulk-{n}" for n in range(500)]) == 500
    assert room_join_many(sku=sku, buyers=["bulk-7", "late"]) == 1  # bulk-7 has its place
    assert room_counts(sku=sku).waiting == 501
    late = place_ask(sku=sku, buyer="late")
    assert (late.state, late.position, late.ahead) == ("waiting", 501, 500)
    moved_on(sku)
    assert place_ask(sku=sku, buyer="bulk-0").state == "admitted"  # first in, first admitted


def test_places_are_admitted_in_order_while_the_active_bound_has_room():
    sku = open_room()
    for buyer in ("ann", "bob", "cat"):
        place_ask(sku=sku, buyer=buyer)
    moved_on(sku)
    cat = place_ask(sku=sku, buyer="cat")
    assert (cat.state, cat.ahead, cat.admission) == ("waiting", 0, None)  # ann and bob hold both slots
    ann = place_ask(sku=sku, buyer="ann")
    assert ann.state == "admitted" and ann.admission
    admitted = admission_read(ann.admission)
    assert (admitted.buyer, admitted.sku) == ("ann", sku)
    assert ann.admission_expires_at == admitted.expires_at
    # ann buys: her slot frees, and cat's next ask admits her.
    spend(sku=sku, buyer="ann", token=ann.admission, key="k-ann")
    moved_on(sku)
    assert place_ask(sku=sku, buyer="cat").state == "admitted"
    assert place_ask(sku=sku, buyer="ann").state == "used"


def test_a_place_whose_holder_missed_the_ask_it_was_told_is_skipped_and_forgotten(settings):
    settings.FLASHSALE_ROOM_ABANDON_S = 0  # a place a millisecond late for its ask is abandoned
    sku = open_room(terms=RoomTerms(rate=1000, active=1, admission_s=60))
    place_ask(sku=sku, buyer="ann")
    place_ask(sku=sku, buyer="bob")
    gone(sku, "ann")
    moved_on(sku)
    assert place_ask(sku=sku, buyer="bob").state == "admitted"  # ann's turn came; she was gone
    back = place_ask(sku=sku, buyer="ann")
    assert (back.state, back.position) == ("waiting", 3)  # at the back now


def test_a_place_is_kept_while_its_holder_is_not_late_for_the_ask_it_was_told(settings):
    settings.FLASHSALE_ROOM_ABANDON_S = 0
    sku = open_room(terms=RoomTerms(rate=1000, active=1, admission_s=60))
    assert place_ask(sku=sku, buyer="ann").ask_again_s == 2  # the least: ann is next
    place_ask(sku=sku, buyer="bob")
    moved_on(sku)
    # ann has not asked since, but her next ask is not due for two seconds: still hers.
    assert place_ask(sku=sku, buyer="bob").state == "waiting"
    assert place_ask(sku=sku, buyer="ann").state == "admitted"


def test_a_buyer_is_told_to_ask_again_after_a_quarter_of_its_wait_from_two_seconds_to_a_minute():
    sku = open_room(terms=RoomTerms(rate=4, active=1, admission_s=60))
    room_join_many(sku=sku, buyers=[f"b{n}" for n in range(1000)])
    told = {n: place_ask(sku=sku, buyer=f"b{n}") for n in (0, 8, 100, 999)}
    assert {n: (place.ahead, place.ask_again_s) for n, place in told.items()} == {
        0: (0, 2), 8: (8, 2), 100: (100, 6.25), 999: (999, 60)}  # 100 ahead at 4 a second: 25 s
    assert all(place.ask_again_s * 1000 == ask_interval_ms(place.ahead, 4) for place in told.values())
    # Each ask sets when the next is due, as the room reads it for the place's turn.
    due = int(gate_redis().hget(room_keys(sku)["asked"], "b100"))
    assert due - int(gate_redis().hget(room_keys(sku)["asked"], "b0")) >= 6250 - 2000


def test_an_admission_unused_in_its_time_frees_its_slot():
    sku = open_room(terms=RoomTerms(rate=1000, active=1, admission_s=1))
    place_ask(sku=sku, buyer="ann")
    place_ask(sku=sku, buyer="bob")
    moved_on(sku)
    ann = place_ask(sku=sku, buyer="ann")
    assert ann.state == "admitted" and place_ask(sku=sku, buyer="bob").state == "waiting"
    time.sleep(1.05)
    assert place_ask(sku=sku, buyer="bob").state == "admitted"
    with pytest.raises(AdmissionRefused) as refused:
        spend(sku=sku, buyer="ann", token=ann.admission, key="k-late")
    assert refused.value.extra["reason"] in ("invalid", "expired")  # the token's exp, or Redis's clock
    again = place_ask(sku=sku, buyer="ann")  # asks again: a new place, at the back
    assert (again.state, again.position) == ("waiting", 3)


def test_an_admission_buys_once_for_its_buyer_and_its_sale():
    sku = open_room()
    place_ask(sku=sku, buyer="ann")
    moved_on(sku)
    token = place_ask(sku=sku, buyer="ann").admission

    def reason(**changes) -> str:
        with pytest.raises(AdmissionRefused) as refused:
            spend(**{"sku": sku, "buyer": "ann", "token": token, "key": "k-1", **changes})
        return refused.value.extra["reason"]

    assert spend(sku=sku, buyer="ann", token=None, key="k-1") is False  # the sale decides
    assert reason(token=token[:-2] + ("AA" if token[-2:] != "AA" else "BB")) == "invalid"
    payload, _ = token.rsplit(".", 1)
    fields = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))  # unverified
    bobs = base64.urlsafe_b64encode(json.dumps(["bob", *fields[1:]]).encode()).rstrip(b"=")
    guessed = Signer(b"guess", digest_method=hashlib.sha256, key_derivation="none")
    assert reason(buyer="bob", token=guessed.sign(bobs).decode()) == "invalid"
    unsalted = Signer(django_settings.SECRET_KEY, digest_method=hashlib.sha256)  # not the room's key
    assert reason(buyer="bob", token=unsalted.sign(bobs).decode()) == "invalid"
    ended = admission_token(buyer="ann", sku=sku, sale=fields[2], expires_at=int(time.time()) - LEEWAY_S - 1)
    assert reason(token=ended) == "invalid"  # past its end, whatever Redis says
    assert reason(buyer="bob") == "not_yours"
    open_room(sku="r-2")
    assert reason(sku="r-2") == "not_yours"
    assert spend(sku=sku, buyer="ann", token=token, key="k-1") is True
    assert spend(sku=sku, buyer="ann", token=token, key="k-1") is True  # the same purchase, retried
    assert reason(key="k-2") == "used"
    open_room(sku=sku)  # the sale reset: a new room, and a new sale
    assert reason(key="k-1") == "stale"


def test_an_address_takes_a_bounded_number_of_places(settings):
    settings.FLASHSALE_ROOM_PLACES_PER_ADDRESS = 2
    sku = open_room()
    place_ask(sku=sku, buyer="bot-1", address="10.0.0.9")
    place_ask(sku=sku, buyer="bot-2", address="10.0.0.9")
    with pytest.raises(PlacesBounded):
        place_ask(sku=sku, buyer="bot-3", address="10.0.0.9")
    assert place_ask(sku=sku, buyer="bot-1", address="10.0.0.9").position == 1  # its own, asked again
    assert place_ask(sku=sku, buyer="bot-3", address="10.0.0.10").position == 3


def _solved(sku: str, bits: int) -> str:
    return challenge_solve(challenge_issue(purpose=room_purpose(sku), bits=bits).token, bits)


def test_a_rooms_work_is_checked_and_spent_in_the_asks_one_call(settings, django_assert_num_queries):
    settings.FLASHSALE_ROOM_PLACES_PER_ADDRESS = 1
    sku = open_room(terms=RoomTerms.given(rate=1, challenge_bits=6))
    for solution, reason in ((None, "missing"), ("x" * 40 + ":1", "invalid"),
                             (_solved("r-other", 6), "other_purpose"), (_solved(sku, 3), "too_easy")):
        with pytest.raises(ChallengeRefused) as refused:
            place_ask(sku=sku, buyer="ann", address="10.0.0.1", solution=solution)
        assert refused.value.extra["reason"] == reason
    solution = _solved(sku, 6)
    with django_assert_num_queries(0):  # the room's bits are its script's to compare
        assert place_ask(sku=sku, buyer="ann", address="10.0.0.1", solution=solution).position == 1
    # Her place again, whatever she sends: a returning buyer needs no work.
    assert place_ask(sku=sku, buyer="ann", address="10.0.0.1", solution="stale:1").position == 1
    with pytest.raises(ChallengeRefused) as refused:
        place_ask(sku=sku, buyer="bob", address="10.0.0.2", solution=solution)
    assert refused.value.extra["reason"] == "used"
    # A place refused for its address spends no work: the same solution takes one
    # from another.
    carl = _solved(sku, 6)
    with pytest.raises(PlacesBounded):
        place_ask(sku=sku, buyer="carl", address="10.0.0.1", solution=carl)
    assert place_ask(sku=sku, buyer="carl", address="10.0.0.3", solution=carl).position == 2


def test_a_skipped_place_gives_its_addresss_count_back(settings):
    settings.FLASHSALE_ROOM_PLACES_PER_ADDRESS = 1  # set as the room opens
    settings.FLASHSALE_ROOM_ABANDON_S = 0  # a place a millisecond late for its ask is abandoned
    sku = open_room(terms=RoomTerms(rate=1000, active=1, admission_s=60))
    place_ask(sku=sku, buyer="ann", address="10.0.0.1")
    place_ask(sku=sku, buyer="bob", address="10.0.0.2")
    with pytest.raises(PlacesBounded):  # ann's office shares her address
        place_ask(sku=sku, buyer="cat", address="10.0.0.1")
    gone(sku, "ann")
    moved_on(sku)
    assert place_ask(sku=sku, buyer="bob", address="10.0.0.2").state == "admitted"  # ann skipped
    assert place_ask(sku=sku, buyer="cat", address="10.0.0.1").state == "waiting"


def test_an_admission_run_out_unused_gives_its_addresss_count_back_and_a_spent_one_keeps_it(settings):
    settings.FLASHSALE_ROOM_PLACES_PER_ADDRESS = 1
    sku = open_room(terms=RoomTerms(rate=1000, active=2, admission_s=1))
    place_ask(sku=sku, buyer="ann", address="10.0.0.1")
    place_ask(sku=sku, buyer="dan", address="10.0.0.4")
    moved_on(sku)
    assert place_ask(sku=sku, buyer="ann", address="10.0.0.1").state == "admitted"
    dan = place_ask(sku=sku, buyer="dan", address="10.0.0.4")
    assert spend(sku=sku, buyer="dan", token=dan.admission, key="k-dan") is True
    time.sleep(1.05)  # both admissions' time is up: ann's unused, dan's spent
    place_ask(sku=sku, buyer="bob", address="10.0.0.2")  # the room moves on
    assert place_ask(sku=sku, buyer="cat", address="10.0.0.1").state in ("waiting", "admitted")
    with pytest.raises(PlacesBounded):
        place_ask(sku=sku, buyer="eve", address="10.0.0.4")
    with pytest.raises(PlacesBounded):  # ann asks again: a new place, and cat holds her address's one
        place_ask(sku=sku, buyer="ann", address="10.0.0.1")


def test_a_room_redis_lost_opens_again_empty_and_a_sale_without_one_has_none():
    sku = open_room()
    place_ask(sku=sku, buyer="ann")
    gate_redis().delete(*room_keys(sku).values())
    assert place_ask(sku=sku, buyer="bob").position == 1
    sale_reset(sku=sku, stock=10, strategy="atomic")  # no room this time
    with pytest.raises(NotFound):
        place_ask(sku=sku, buyer="ann")
    with pytest.raises(NotFound):
        place_ask(sku="no-such", buyer="ann")


def test_places_admissions_skips_and_refusals_are_counted(settings):
    def counted(name: str, **labels) -> float:
        return REGISTRY.get_sample_value(f"flashsale_room_{name}_total", labels) or 0.0

    before = {name: counted(name) for name in ("asks", "places", "admissions", "skipped")}
    refused = counted("refused", reason="missing")
    settings.FLASHSALE_ROOM_ABANDON_S = 0
    sku = open_room(terms=RoomTerms(rate=1000, active=1, admission_s=60))
    place_ask(sku=sku, buyer="ann")
    place_ask(sku=sku, buyer="bob")
    gone(sku, "ann")
    moved_on(sku)
    place_ask(sku=sku, buyer="bob")  # skips ann, admits bob
    assert {name: counted(name) - before[name] for name in before} == {"asks": 3, "places": 2,
                                                                       "admissions": 1, "skipped": 1}
    open_now = open_room(sku="r-open", opens_in=0)
    with pytest.raises(AdmissionRefused):
        order_create(sku=open_now, quantity=1, user_id="cat", idempotency_key="k-cat")
    assert counted("refused", reason="missing") == refused + 1


def test_the_live_rooms_places_waiting_and_admissions_running_are_gauged():
    sku = open_room(terms=RoomTerms(rate=1000, active=1, admission_s=60))
    for buyer in ("ann", "bob", "cat"):
        place_ask(sku=sku, buyer=buyer)
    moved_on(sku)
    place_ask(sku=sku, buyer="bob")  # admits ann: one running, two waiting
    gauges = {family.name: family.samples[0].value for family in RoomCollector().collect()}
    assert gauges == {"flashsale_room_waiting": 2, "flashsale_room_active": 1}
