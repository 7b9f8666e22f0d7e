"""The waiting room: a sale's buyers asking for places, admitted in order at the
room's rate, each admission a signed token a purchase spends.

- ``room_set``, ``room_open``: the reset sets a sale's room (or none) with its rows,
  then empties its queue in Redis.
- ``place_ask``: a buyer's ask, the first and every later one (a refresh, another
  tab, another instance): the same place; the room moves on as buyers ask.
- ``admission_checked``: a purchase's admission, its signature and its buyer checked;
  ``admission_spend`` spends it (the gate's sale script spends its own).

Fairness: first come, first admitted (the order of first asks, Redis's), or with a
shuffled pre-queue the places taken before the opening in a random order first. Each
waiting buyer is told when to ask again (its wait over 4, from 2 to 60 s: a
crowd far back asks seldom); a place whose holder is ``FLASHSALE_ROOM_ABANDON_S``
late for that ask is skipped; an admission unused within its time frees its slot.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime

import redis
from django.conf import settings
from django.utils import timezone

from common.challenges import Challenge, Proof, challenge_issue, challenge_read
from common.errors import AdmissionRefused, ChallengeRefused, NotFound, PlacesBounded, Unavailable
from common.metrics import count
from inventory.models import Product

from . import metrics, store
from .models import Room
from .tokens import Admission, TokenRefused, admission_read, admission_token

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RoomTerms:
    """How a sale admits: ``rate`` a second, ``active`` admitted at once at most, each
    admission good for ``admission_s``, in ``order``."""

    rate: int
    active: int
    admission_s: int
    order: str = "fifo"  # or "shuffled": the places taken before the opening, shuffled
    challenge_bits: int = 0  # proof of work before a place (0: none)

    @classmethod
    def given(cls, *, rate: int, active: int | None = None, admission_s: int | None = None,
              order: str | None = None, challenge_bits: int | None = None) -> RoomTerms:
        """The terms a request set, the rest by default: ten seconds' admissions
        running at once, each good for a minute, first come first admitted (the
        order the room promises a buyer who asked first), no work asked."""
        return cls(rate=rate, active=active or 10 * rate, admission_s=admission_s or 60,
                   order=order or "fifo", challenge_bits=challenge_bits or 0)


@dataclass(frozen=True)
class Place:
    """A buyer's place, as its ask found it."""

    state: str  # waiting, admitted, used
    position: int
    ahead: int
    wait_s: float | None  # the estimate at the room's rate (None: admitted)
    admission: str | None  # the token, once admitted and not used
    admission_expires_at: int | None  # epoch seconds
    # Waiting: when to ask again, s; a place whose holder is FLASHSALE_ROOM_ABANDON_S late
    # for that ask is skipped when the room reaches it.
    ask_again_s: float | None = None


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _terms(room: Room) -> dict[str, int | str]:
    """The room as Redis keeps it: it admits from the sale's start (or its reset)."""
    starts = room.product.starts_at
    opens = max(_ms(starts), _ms(room.opened_at)) if starts is not None else _ms(room.opened_at)
    return dict(sale=str(_ms(room.opened_at)), opens=opens, rate=room.rate, active=room.active,
                admission_ms=room.admission_s * 1000, abandon_ms=settings.FLASHSALE_ROOM_ABANDON_S * 1000,
                per_address=settings.FLASHSALE_ROOM_PLACES_PER_ADDRESS, order=room.admit_order,
                challenge_bits=room.challenge_bits)


def room_set(*, product: Product, terms: RoomTerms | None) -> tuple[Room | None, bool]:
    """Write the room ``terms`` say for ``product``'s new sale (None: none), in the
    caller's transaction (the reset's), so that a purchase that reads the new sale's
    rows finds its room with them. ``room_open`` then opens it in Redis.

    :returns: the room, and whether Redis may hold a room of the sale before (one to drop).
    """
    if terms is None:
        removed, _ = Room.objects.filter(product=product).delete()
        return None, bool(removed)
    room, created = Room.objects.update_or_create(product=product, defaults={
        "rate": terms.rate, "active": terms.active, "admission_s": terms.admission_s,
        "admit_order": terms.order, "challenge_bits": terms.challenge_bits, "opened_at": timezone.now()})
    return room, not created


def room_open(*, product: Product, room: Room | None, had: bool) -> None:
    """Open ``product``'s new sale's ``room`` in Redis, its queue empty, as ``room_set``
    wrote it; with no room, drop the sale's before if it ``had`` one. A sale that had
    no room and has none asks Redis nothing: a reset without one works with Redis away.

    :raises Unavailable: Redis cannot be reached (its row stands: the first ask opens
        the room from it).
    """
    try:
        if room is not None:
            store.room_write(sku=product.sku, **_terms(room))
        elif had:
            store.room_drop(sku=product.sku)
    except redis.RedisError as e:
        raise Unavailable(f"{product.sku}: the waiting room's Redis cannot be reached: {e}",
                          backend="redis") from e


def room_purpose(sku: str) -> str:
    """What a place's proof of work names (``common.challenges``)."""
    return f"room:{sku}"


def place_challenge(*, sku: str) -> Challenge:
    """A proof-of-work challenge for a place in ``sku``'s room, of the zero bits its
    sale asks (0: none).

    :raises NotFound: no such product, or its sale has no waiting room.
    """
    bits = _room_bits(sku)
    if bits is None:
        raise NotFound(f"{sku}: no such sale with a waiting room", extra={"sku": sku})
    return challenge_issue(purpose=room_purpose(sku), bits=bits)


def place_ask(*, sku: str, buyer: str, address: str = "", solution: str | None = None) -> Place:
    """``buyer``'s place in ``sku``'s waiting room: taken at the first ask, the same one
    after. A room that asks for proof of work before a place takes one only with a
    ``solution`` (``place_challenge``), spent then; a buyer's later asks need none.

    :raises NotFound: no such product, or its sale has no waiting room.
    :raises PlacesBounded: ``address`` took as many places in this sale as one may.
    :raises ChallengeRefused: a new place, and ``solution`` does not show the work.
    :raises Unavailable: Redis cannot be reached.
    """
    proof, refused = _proof(solution, room_purpose(sku))
    try:
        asked = _asked(sku=sku, buyer=buyer, address=address, proof=proof)
    except redis.RedisError as e:
        raise Unavailable(f"{sku}: the waiting room's Redis cannot be reached: {e}", backend="redis") from e
    if asked.state == "challenge":
        raise refused or ChallengeRefused.because("too_easy", room_purpose(sku))
    if asked.state == "spent":
        raise ChallengeRefused.because("used", room_purpose(sku))
    for counter, amount in ((metrics.ASKS, 1), (metrics.PLACES, asked.joined),
                            (metrics.ADMISSIONS, asked.admitted), (metrics.SKIPPED, asked.skipped)):
        if amount:
            count(counter, amount=amount)
    if asked.state == "bounded":
        raise PlacesBounded(f"{sku}: this address took {settings.FLASHSALE_ROOM_PLACES_PER_ADDRESS} places "
                           "in the waiting room already", extra={"sku": sku})
    if asked.state == "admitted":
        expires = asked.admission_ends_ms // 1000
        return Place("admitted", asked.position, 0, None,
                     admission_token(buyer=buyer, sku=sku, sale=asked.sale, expires_at=expires), expires)
    if asked.state == "used":
        return Place("used", asked.position, 0, None, None, None)
    return Place("waiting", asked.position, asked.ahead,
                 math.ceil(asked.ahead / asked.rate) if asked.rate else None, None, None,
                 ask_again_s=asked.again_ms / 1000)


def _room_bits(sku: str) -> int | None:
    """The zero bits a place in ``sku``'s room costs; None: no such room."""
    return Room.objects.filter(product__sku=sku).values_list("challenge_bits", flat=True).first()


def _proof(solution: str | None, purpose: str) -> tuple[Proof | None, ChallengeRefused | None]:
    """The work ``solution`` shows, read without I/O, or why it shows none: said only
    if the room asks for work of a new place (a returning buyer needs none). The room's
    script compares it with the room's bits and spends it, in the ask's one call."""
    try:
        return challenge_read(solution=solution, purpose=purpose), None
    except ChallengeRefused as e:
        return None, e


def _asked(*, sku: str, buyer: str, address: str, proof: Proof | None) -> store.Asked:
    asked = store.room_ask(sku=sku, buyer=buyer, address=address, join=True, proof=proof)
    if asked.state == "none":  # no room, or Redis lost it: the row says which
        _reopened(sku)
        asked = store.room_ask(sku=sku, buyer=buyer, address=address, join=True, proof=proof)
    return asked


def _reopened(sku: str) -> None:
    """The room of ``sku``'s sale written again, empty, if its row says it has one
    (Redis lost it); another instance may have done it first.

    :raises NotFound: no such product, or no room.
    """
    room = Room.objects.select_related("product").filter(product__sku=sku).first()
    if room is None:
        raise NotFound(f"{sku}: no such sale with a waiting room", extra={"sku": sku})
    store.room_reopen(sku=sku, **_terms(room))


def admission_checked(*, sku: str, buyer: str, token: str | None) -> Admission | None:
    """What ``token`` admits, checked for ``buyer`` and ``sku`` (None: no token; the
    purchase then asks the sale whether it needs one). Where it is spent is the
    seller's: the gate's sale script (``orders.gate.sell``), or ``admission_spend``.

    :raises AdmissionRefused: a token forged, expired, another buyer's or another
        sku's; nothing is written.
    """
    if not token:
        return None
    try:
        admission = admission_read(token)
    except TokenRefused as e:
        count(metrics.REFUSED, "invalid")
        raise AdmissionRefused(f"{sku}: the admission is not valid: {e}",
                               extra={"sku": sku, "reason": "invalid"}) from None
    if admission.buyer != buyer or admission.sku != sku:
        count(metrics.REFUSED, "not_yours")
        raise AdmissionRefused(f"{sku}: the admission is another buyer's or another sale's",
                               extra={"sku": sku, "reason": "not_yours"})
    return admission


def admission_spend(*, sku: str, buyer: str, admission: Admission | None, key: str) -> bool:
    """Spend ``buyer``'s checked admission to ``sku``'s sale on the purchase ``key``:
    whether it was spent (False: none, or the sale has no room in Redis; the purchase
    then asks the sale whether it needs one, ``admission_refused_error``).

    :raises AdmissionRefused: an admission of another sale, never given, run out, or
        spent on another purchase; nothing is written.
    :raises Unavailable: Redis cannot be reached.
    """
    if admission is None:
        return False
    try:
        spent = store.admission_use(sku=sku, buyer=buyer, sale=admission.sale, key=key)
    except redis.RedisError as e:
        raise Unavailable(f"{sku}: the waiting room's Redis cannot be reached: {e}", backend="redis") from e
    if spent == "none":
        return False
    if spent != "ok":
        raise admission_refused_error(sku=sku, reason=spent)
    return True


def admission_unspend(*, sku: str, buyer: str, key: str) -> None:
    """Give ``buyer`` back the admission the purchase ``key`` spent, when the sale
    decided nothing (503, nothing written): an unkeyed purchase cannot be retried
    under its key, and a 503 must not cost the buyer their place. Redis out of
    reach: the admission stays spent (logged)."""
    try:
        store.admission_unspend(sku=sku, buyer=buyer, key=key)
    except redis.RedisError as e:
        logger.warning("%s: an admission spent by a purchase that wrote nothing stays spent: %s", sku, e)


_REFUSALS = {
    "missing": "the sale has a waiting room: ask it for a place, and buy with the admission it gives "
               "(the Admission header)",
    "stale": "the admission is of an earlier sale of it",
    "not_admitted": "the admission cannot buy: not admitted",
    "used": "the admission cannot buy: used",
    "expired": "the admission cannot buy: expired",
}


def admission_refused_error(*, sku: str, reason: str = "missing") -> AdmissionRefused:
    """What a purchase of a sale with a room answers when its admission does not buy
    (``reason``: missing, stale, not_admitted, used, expired); counted."""
    count(metrics.REFUSED, reason)
    return AdmissionRefused(f"{sku}: {_REFUSALS.get(reason, reason)}", extra={"sku": sku, "reason": reason})
