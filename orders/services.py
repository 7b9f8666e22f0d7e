"""The purchase, and the reset of a sale.

One purchase, in order: validate → the seller of the product's strategy (the one
this process last saw it sold by, checked by that seller before it writes: see
``_last_seen``) → idempotency check → the sale's mark (the product's strategy and
window) → read the product's stock segments (once per sale and process: see
``_segments_planned``) → for each group of segments the plan names: acquire their
locks → open the transaction → count the buyer's units, create the order, deduct the
stock, append the flow rows → commit → release the locks; a group that ran dry since
the read falls over to the next. Where no Python needs to run between those
statements (``atomic``, one segment), the transaction is one stored-procedure call
(``orders.onetrip``). The locks are held across the commit: released
earlier, the next holder could read the stock before this write is visible. Each
lock's fencing token, where it has one, goes with the stock deduction, which refuses
it once a newer holder has touched that segment: a lease that ran out mid-purchase
costs this purchase, not the stock.

Every answer is true of the database: a refused keyed request first makes sure its
key has no order (unless the sale's mark vouches for the flags); a failure at or
after the COMMIT is ``OutcomeUnknown``, never "nothing written"; a database that
cannot be reached is ``Unavailable``; nothing commits past the purchase's deadline.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.core.signals import setting_changed
from django.db import DatabaseError, IntegrityError, transaction
from django.dispatch import receiver

from flashsale.database_errors import database_deadlocked
from flashsale.errors import (
    ApplicationError,
    Busy,
    IdempotencyConflict,
    InvalidInput,
    NotFound,
    OutcomeUnknown,
    SoldOut,
    StockChanged,
    Unavailable,
    database_answer,
)
from flashsale.strategies import Seller, StrategySpec, UnknownStrategy, strategy_of
from inventory.models import Product, Stock
from inventory.reads import product_cached_refresh
from inventory.selectors import flows_remaining, product_get, segments_get
from inventory.services import Deducted, Fence, product_reset, stock_deduct, stock_plan
from locking import (
    BaseLock,
    LockCommitUnknownError,
    LockError,
    LockLostError,
    LockReleaseError,
    LockUnavailableError,
    get_locks,
)

from .gate.sale import gate_close, gate_open, gate_settle, gate_tally, keys_of_orders
from .gate.sell import GateCold, gate_sell
from .idempotency import (
    flag_claim,
    flag_complete,
    flag_take_over,
    flag_unsettled,
    flags_forget,
    request_fingerprint,
)
from .limits import quota_open, quota_take
from .models import BuyerQuota, GateSale, Order
from .onetrip import past_deadline, purchase_call
from .salemark import SaleMark, sale_mark_get, sale_mark_open, sale_mark_sold_out
from .window import SaleWindow

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Timings:
    """Where a purchase spent its time around the stock, in milliseconds."""

    lock_wait_ms: float  # from asking for the stock lock until it was granted
    # From taking the stock until giving it up: the lock, from granted to released
    # (after the commit); for a lockless strategy, the stock row, from its first
    # write to the commit. What every other buyer of the product waits behind.
    hold_ms: float


@dataclass(frozen=True)
class OrderResult:
    """A purchase's answer, whichever seller made it."""

    order_id: int
    sku: str
    quantity: int
    strategy: str
    instance: str  # the instance that placed (or accepted) the order
    # "confirmed": the order is in the database; "accepted": the gate took the stock
    # and the order is on its way there (GET /api/orders/<id> follows it).
    status: str
    remaining: int
    replayed: bool
    timings: Timings | None = None  # None for a replay

    @classmethod
    def of(cls, order: Order, *, remaining: int, replayed: bool,
           timings: Timings | None = None) -> OrderResult:
        return cls(order_id=order.pk, sku=order.product.sku, quantity=order.quantity, strategy=order.strategy,
                   instance=order.instance, status="confirmed", remaining=remaining, replayed=replayed,
                   timings=timings)


def _replay(*, order: Order, fingerprint: str) -> OrderResult:
    if request_fingerprint(sku=order.product.sku, quantity=order.quantity,
                           user_id=order.user_id) != fingerprint:
        raise IdempotencyConflict(
            "this Idempotency-Key was used with a different request",
            extra={"order_id": order.pk},
        )
    return OrderResult.of(order, remaining=flows_remaining(operation_flag=order.idempotency_key),
                          replayed=True)


def _order_by_key(key: str) -> Order | None:
    return Order.objects.select_related("product").filter(idempotency_key=key).first()


def _replay_by_key(*, key: str, fingerprint: str) -> OrderResult | None:
    """The database's answer for ``key``: its order's, if it has one. The flag Redis
    lost is written again, with the original request's fingerprint."""
    existing = _order_by_key(key)
    if existing is None:
        return None
    original = request_fingerprint(sku=existing.product.sku, quantity=existing.quantity,
                                   user_id=existing.user_id)
    flag_complete(key=key, fingerprint=original, order_id=existing.pk)
    return _replay(order=existing, fingerprint=fingerprint)


def _outcome_unknown(order: Order) -> OutcomeUnknown:
    return OutcomeUnknown("the database connection died during the commit: whether the order was "
                          "placed is unknown; retry with the same Idempotency-Key to learn it",
                          order_id=order.pk)


# How often a retry waiting for its key's first request looks again.
INFLIGHT_POLL_SECONDS = 0.05


def _known_outcome(*, key: str, fingerprint: str) -> OrderResult | None:
    """Claim the key; if an earlier request holds it, answer as that request did.

    A retry that arrives while the first request is still in flight waits for it, a
    short and bounded time (``FLASHSALE_INFLIGHT_WAIT``), and answers its outcome: a
    client that retried on a timeout gets its order, not a 503 to retry again.

    :returns: the original order's result for a replay, ``None`` when this
        request owns the key and should go ahead.
    """
    deadline = time.monotonic() + settings.FLASHSALE_INFLIGHT_WAIT
    while True:
        flag = flag_claim(key=key, fingerprint=fingerprint)
        if flag is None:
            return None
        if flag.fingerprint != fingerprint:
            raise IdempotencyConflict("this Idempotency-Key was used with a different request")
        order = _order_by_key(key)
        if order is not None:
            return _replay(order=order, fingerprint=fingerprint)
        if flag.stale and flag.order_id is None:
            # Its request died without an answer, and the database says it left no
            # order (it cannot commit now: past its deadline): this request goes on.
            flag_take_over(key=key, fingerprint=fingerprint)
            return None
        # Every way round the loop passes here: bounded by the wait, whatever the
        # flags do meanwhile.
        if time.monotonic() >= deadline:
            raise Busy("a request with this Idempotency-Key is still in progress")
        if flag.order_id is not None:
            # The flag outlived its order (the sale was reset, or a commit whose
            # outcome was unknown did not land): the key is free again, at once.
            flags_forget(keys=[key])
        else:
            time.sleep(INFLIGHT_POLL_SECONDS)  # the first request is in flight: wait for its outcome


def _release(lock: BaseLock, *, written: Order | None) -> None:
    """Release after the transaction ended (``written``: the order it committed, or
    for a lock whose release commits, is about to; ``None`` after a failure). A lock
    that was no longer ours changes nothing now: after a commit, say so loudly
    (mutual exclusion may have been broken); after a failure, the failure is what
    the caller needs to hear. A lock whose release is the commit (the MySQL locks)
    failing to release means the purchase was rolled back, or, if the connection
    died during the COMMIT, that nobody here knows: that the buyer must hear. Any
    other failure to release (the lock's server gone) changes nothing already
    decided: logged, not raised."""
    try:
        lock.release()
    except Exception as e:
        if written is not None and lock.commits_work:
            if isinstance(e, LockReleaseError) and not isinstance(e, LockCommitUnknownError):
                raise Busy("the purchase was rolled back as its lock was released; nothing was written",
                           extra={"lock": lock.name}) from e
            # The release was the commit, and it did not say it committed: only the
            # database knows now.
            raise _outcome_unknown(written) from e
        _release_failed(lock, e, committed=written is not None)


def _release_failed(lock: BaseLock, e: Exception, *, committed: bool) -> None:
    if isinstance(e, LockReleaseError):
        logger.info("%s: release failed after a failed purchase: %s", lock, e)
    elif isinstance(e, LockError):
        if committed:
            logger.warning("%s was not held at release, after the purchase committed: %s", lock, e)
        else:
            logger.info("%s was not held at release, after a failed purchase: %s", lock, e)
    else:
        # The lock's server went away (a Redis or ZooKeeper connection error). The
        # purchase's outcome is decided already, and the buyer must hear that, not
        # this: the lease (or the session) frees the lock on its own.
        logger.error("%s: release failed (%s: %s); the lock frees itself when its lease ends",
                     lock, type(e).__name__, e)


# Rounds of planning a purchase of a segmented product: the plan comes from a plain
# read, and each round re-reads after every group it named ran dry meanwhile.
PLAN_ROUNDS = 3


# sku -> (the sale's opening, as its mark says, and its segments as this process last
# read them): the plan's read, once per sale and process.
_planned: dict[str, tuple[float, list[Stock]]] = {}
_PLANNED_MAX = 10_000  # products; past it, the reads start over


def _segments_planned(sku: str, mark: SaleMark | None) -> list[Stock]:
    """The product's segments to plan a purchase with. The plan's read only orders
    the tries (``stock_plan``): the deduction decides under the lock, and in a sale
    stock only falls, so an old read sends a try at worst to a segment that ran dry,
    which falls over, and a round that finds every try refused reads afresh (``mark``
    ``None``). So while the sale's mark says which sale this is, one read per
    process serves the whole sale: the product's id, its strategy and its segments
    change only with a reset, which opens a new sale. A one-segment product, the
    flash sale's hot case, is never read again."""
    opened = mark.opened if mark is not None else None
    known = _planned.get(sku)
    if opened is not None and known is not None and known[0] == opened:
        return known[1]
    segments = segments_get(sku=sku)
    if opened is None and known is not None:
        opened = known[0]  # a fresh read for the sale this process knows
    if opened is not None:
        if len(_planned) >= _PLANNED_MAX:
            _planned.clear()
        _planned[sku] = (opened, segments)
    return segments


def _lock_name(sku: str, segment: int, segments: int) -> str:
    # A product in one segment keeps the product's own lock name.
    return f"stock:{sku}" if segments == 1 else f"stock:{sku}:{segment}"


class _Placed(NamedTuple):
    order: Order
    remaining: int  # what the segments it took from have left (the answer's "remaining")
    product_left: int  # the product's stock as far as this purchase knows: at least what is left
    timings: Timings


def _order_place(*, segments: list[Stock], strategy: StrategySpec, quantity: int, user_id: str, key: str,
                 deadline: float) -> _Placed:
    """Take the stock from the groups of segments the plan names, in turn: a group
    that ran dry since the plan's read falls over to the next. Sold out only when
    no combination of segments can serve the quantity."""
    product = segments[0].product
    quota_open(product=product, user_id=user_id)
    for round_ in range(PLAN_ROUNDS):
        if round_:
            segments = _segments_planned(product.sku, None)
        for group in stock_plan(segments, quantity):
            try:
                order, deducted, timings = _order_take(product=product, strategy=strategy, group=group,
                                                       count=len(segments), quantity=quantity,
                                                       user_id=user_id, key=key, deadline=deadline)
            except SoldOut as e:
                refused, last = group, e  # the group ran dry since the read: the next one
                continue
            others = sum(s.quantity for s in segments if s.segment not in group)
            return _Placed(order, deducted.remaining, deducted.remaining + others, timings)
        if len(refused) == len(segments):
            raise last  # every segment, counted under its lock: this is the product's answer
    # Rounds out: the read says what is left (at most that: stock only falls in a sale).
    available = sum(s.quantity for s in segments_get(sku=product.sku))
    if available >= quantity:
        raise Busy(f"{product.sku}: the segments ran dry under every try; the stock is still there",
                   extra={"sku": product.sku})
    raise SoldOut.short_of(product.sku, quantity, available)


def _order_take(*, product: Product, strategy: StrategySpec, group: list[int], count: int, quantity: int,
                user_id: str, key: str, deadline: float) -> tuple[Order, Deducted, Timings]:
    """One try: lock the group's segments, write the purchase, commit, release."""
    names = {segment: _lock_name(product.sku, segment, count) for segment in group}
    lock = get_locks(names.values(), alias=strategy.lock)
    asked = time.perf_counter()
    try:
        acquired = lock.acquire()
    except LockUnavailableError as e:
        raise Unavailable("the stock lock's server cannot be reached; nothing was written",
                          backend=strategy.name) from e
    if not acquired:
        raise Busy(
            f"stock lock for {product.sku} not acquired within its wait timeout",
            extra={"strategy": strategy.name},
        )
    granted = time.perf_counter()
    fences = None
    if settings.FLASHSALE_FENCING:
        tokens = {segment: lock.fence_of(name) for segment, name in names.items()}
        if None not in tokens.values():
            fences = {segment: Fence(source=strategy.name, token=token) for segment, token in tokens.items()}
    try:
        if strategy.one_trip and len(group) == 1:
            order, deducted = purchase_call(product=product, segment=group[0], quantity=quantity,
                                            user_id=user_id, key=key, strategy=strategy.name,
                                            deadline=deadline)
        else:
            order, deducted = _order_write(product=product, quantity=quantity, user_id=user_id, key=key,
                                           strategy=strategy, lock=lock, group=group, fences=fences,
                                           deadline=deadline)
    except BaseException:
        _release(lock, written=None)
        raise
    # Committed (or, for a lock whose release commits, about to be); only now may
    # the next holder read the stock.
    _release(lock, written=order)
    given_up = time.perf_counter()
    held_since = granted if lock.exclusive else deducted.row_held_since
    return order, deducted, Timings(lock_wait_ms=(granted - asked) * 1000,
                                    hold_ms=(given_up - held_since) * 1000)


def _order_write(*, product: Product, quantity: int, user_id: str, key: str, strategy: StrategySpec,
                 lock: BaseLock, group: list[int], fences: dict[int, Fence] | None, deadline: float
                 ) -> tuple[Order, Deducted]:
    """The purchase transaction, retried while an optimistic write finds the stock
    changed (each attempt a new transaction, so it reads fresh data)."""
    retries = 0
    while True:
        committing = False
        try:
            # A lock whose release commits (the MySQL locks) opened the transaction:
            # the purchase joins it without a savepoint of its own, so a failure rolls
            # back all of it, the holding included, and two statements fewer run
            # under the lock.
            with transaction.atomic(savepoint=not lock.commits_work):
                quota_take(product=product, user_id=user_id, quantity=quantity)
                order = Order.objects.create(
                    user_id=user_id,
                    product=product,
                    quantity=quantity,
                    idempotency_key=key,
                    instance=settings.FLASHSALE_INSTANCE,
                    strategy=strategy.name,
                    retries=retries,
                )
                deducted = stock_deduct(
                    product=product,
                    quantity=quantity,
                    operation_flag=key,
                    order_reference=str(order.pk),
                    deduction=strategy.deduction,
                    segments=group,
                    fences=fences,
                )
                lock.ensure_held()  # the last moment to find out before commit
                if time.monotonic() > deadline:
                    # Paused or starved past the deadline: nginx has answered 504 for
                    # this request and its client has moved on; an order committed
                    # now would be one nobody was told of.
                    raise past_deadline(product.sku)
                committing = not lock.commits_work  # leaving the block commits
            return order, deducted
        except DatabaseError as e:
            # Past the last statement, a failure is the COMMIT's or that of Django's
            # SET autocommit after it: the commit may have landed, and only the
            # database knows now.
            if committing:
                raise _outcome_unknown(order) from e
            raise
        except StockChanged as e:
            if retries >= settings.FLASHSALE_OPTIMISTIC_RETRIES:
                raise Busy(f"{product.sku}: stock kept changing; gave up after {retries} retries",
                           extra={"strategy": strategy.name, "retries": retries}) from e
            retries += 1
        except LockLostError as e:
            raise Busy(f"lost the stock lock for {product.sku} before commit; nothing was written",
                       extra={"strategy": strategy.name}) from e


def order_create(
    *, sku: str, quantity: int, user_id: str, idempotency_key: str | None = None,
    received_at: float | None = None,
) -> OrderResult:
    """Buy ``quantity`` units of ``sku`` for ``user_id``, at most once per key.

    ``received_at`` (epoch seconds, default now) is when the request reached the
    front: the purchase commits nothing after ``FLASHSALE_PURCHASE_DEADLINE`` from it.

    :raises InvalidInput: quantity out of range.
    :raises NotFound: unknown sku.
    :raises SoldOut: not enough stock left.
    :raises IdempotencyConflict: the key was used for a different request.
    :raises Busy: the stock lock, or the key's first request, did not free up in time.
    :raises Unavailable: a server the purchase needs cannot be reached; nothing was written.
    :raises OutcomeUnknown: the connection died during the commit; a retry with the
        key learns whether the order was placed.
    """
    if not 1 <= quantity <= settings.FLASHSALE_MAX_PER_ORDER:
        raise InvalidInput(
            f"quantity must be between 1 and {settings.FLASHSALE_MAX_PER_ORDER}",
            extra={"fields": {"quantity": [f"must be 1..{settings.FLASHSALE_MAX_PER_ORDER}"]}},
        )
    waited = 0.0 if received_at is None else max(time.time() - received_at, 0.0)
    deadline = time.monotonic() - waited + settings.FLASHSALE_PURCHASE_DEADLINE
    if time.monotonic() > deadline:
        # It waited in a queue (a frozen instance's) past the deadline: its client has
        # been answered 504 and moved on; nothing is claimed, nothing written.
        raise Busy(f"{sku}: the purchase arrived past its deadline; nothing was written")
    purchase = dict(sku=sku, quantity=quantity, user_id=user_id, idempotency_key=idempotency_key,
                    deadline=deadline)
    guess = _last_seen.get(sku) or strategy_of("")
    try:
        try:
            return _SELLERS[guess.seller](**purchase)
        except _SoldByAnother as e:
            # The product was reset under another seller's strategy since this process
            # last sold it: that seller, once (it gave back whatever it claimed).
            return _SELLERS[e.strategy.seller](**purchase)
    except _SoldByAnother as e:
        raise Busy(f"{sku} was reset under another strategy during the purchase; nothing was written",
                   extra={"strategy": e.strategy.name}) from None
    except DatabaseError as e:
        answer = database_answer(e, then="nothing was written")
        if answer is None:
            raise
        if isinstance(answer, Unavailable):
            # Closed now, not at the end of the request: whatever runs next on this
            # thread opens a new connection, once the server is back.
            transaction.get_connection().close()
        raise answer from e


# sku -> the strategy this process last found the product's sale under: which seller
# to ask first. A guess (a reset may have changed it since), which each seller checks
# against the sale's mark or the product's row before it writes anything; a seller
# that finds the product is another's hands it over (``_SoldByAnother``).
_last_seen: dict[str, StrategySpec] = {}
_LAST_SEEN_MAX = 10_000  # products; past it, the guesses start over


def _seen(sku: str, strategy: StrategySpec) -> StrategySpec:
    if len(_last_seen) >= _LAST_SEEN_MAX:
        _last_seen.clear()
    _last_seen[sku] = strategy
    return strategy


@receiver(setting_changed)
def _forget_the_guesses(*, setting: str, **kwargs) -> None:
    if setting == "FLASHSALE_STRATEGY":  # the products that follow it moved (override_settings)
        _last_seen.clear()


def _sold_here(sku: str, own: str) -> StrategySpec:
    """The product's strategy (``own``: its row's, or its mark's), if the locked
    transaction sells it; else the hand-over to its seller (the caller frees its
    claim, as for any refusal)."""
    strategy = _seen(sku, strategy_of(own))
    if strategy.seller is not Seller.TRANSACTION:
        raise _SoldByAnother(strategy)
    return strategy


class _SoldByAnother(Exception):  # noqa: N818 (a hand-over, not an error)
    """The product's sale runs under ``strategy``, which another seller serves."""

    def __init__(self, strategy: StrategySpec):
        super().__init__(strategy.name)
        self.strategy = strategy


def _order_create(*, sku: str, quantity: int, user_id: str, idempotency_key: str | None,
                  deadline: float) -> OrderResult:
    """The locked transaction's purchase: the order is in the database when it returns."""
    fingerprint = request_fingerprint(sku=sku, quantity=quantity, user_id=user_id)
    if idempotency_key:
        key = idempotency_key
        known = _known_outcome(key=key, fingerprint=fingerprint)
        if known is not None:
            return known  # a replay is answered even after the sale sold out
    else:
        key = f"auto-{uuid.uuid4().hex}"  # every unkeyed request is its own operation

    mark = sale_mark_get(sku=sku)  # after the claim: see orders.salemark
    try:
        # The product's strategy and its window, after the claim (so that a replay is
        # answered after the end): from the mark, with no query; without the mark,
        # from the row, which the purchase reads anyway.
        if mark.opened is not None:
            strategy = _sold_here(sku, mark.strategy)
            mark.window.check(sku=sku, now=time.time())
        if mark.sold_out:
            raise SoldOut(f"{sku}: sold out", extra={"sku": sku, "requested": quantity, "remaining": 0})
        segments = _segments_planned(sku, mark)
        if mark.opened is None:
            strategy = _sold_here(sku, segments[0].product.strategy)
            SaleWindow.of(segments[0].product).check(sku=sku, now=time.time())
        placed = _order_place(segments=segments, strategy=strategy, quantity=quantity, user_id=user_id,
                              key=key, deadline=deadline)
    except IntegrityError:
        # The Redis flag was gone (expired, flushed) and an earlier request with
        # this key had committed: the unique key refused the second order.
        known = _replay_by_key(key=key, fingerprint=fingerprint)
        if known is None:
            raise
        return known
    except OutcomeUnknown as e:
        if idempotency_key and e.order_id is None:
            flag_unsettled(key=key, fingerprint=fingerprint)  # a retry asks the database at once
        elif idempotency_key:
            # A flag that names the order: a retry asks the database whether it landed.
            flag_complete(key=key, fingerprint=fingerprint, order_id=e.order_id)
        raise
    except BaseException as e:
        if isinstance(e, SoldOut) and e.extra.get("remaining") == 0 and not mark.sold_out:
            sale_mark_sold_out(sku=sku)
        if idempotency_key:
            known = _refusal_checked(e, key=key, fingerprint=fingerprint, mark=mark, deadline=deadline)
            if known is not None:
                return known
        raise
    if placed.product_left == 0:
        sale_mark_sold_out(sku=sku)
    if idempotency_key:
        flag_complete(key=key, fingerprint=fingerprint, order_id=placed.order.pk)
    return OrderResult.of(placed.order, remaining=placed.remaining, replayed=False, timings=placed.timings)


def _gate_order(*, sku: str, quantity: int, user_id: str, idempotency_key: str | None,
                deadline: float) -> OrderResult:
    """The gate's purchase: one script in Redis decides (``orders.gate.sale``); the
    database hears of the order from a persister, after the answer."""
    try:
        sold = gate_sell(sku=sku, quantity=quantity, user_id=user_id,
                         key=idempotency_key or f"auto-{uuid.uuid4().hex}", keyed=idempotency_key is not None,
                         fingerprint=request_fingerprint(sku=sku, quantity=quantity, user_id=user_id))
    except GateCold:
        # No sale in Redis: the product's row says whether it has one (Redis lost it)
        # or is another strategy's (NotFound: no such product).
        strategy = _seen(sku, strategy_of(product_get(sku=sku).strategy))
        if strategy.seller is not Seller.GATE:
            raise _SoldByAnother(strategy) from None
        raise
    return OrderResult(order_id=sold.order_id, sku=sku, quantity=sold.quantity, strategy="gate",
                       instance=sold.instance, status="accepted", remaining=sold.remaining,
                       replayed=sold.replayed,
                       timings=None if sold.replayed else Timings(lock_wait_ms=0.0, hold_ms=sold.script_ms))


# Who sells, by the strategy's seller: the one decision between the two shapes of a purchase.
_SELLERS = {Seller.TRANSACTION: _order_create, Seller.GATE: _gate_order}


def _refusal_checked(error: BaseException, *, key: str, fingerprint: str, mark: SaleMark,
                     deadline: float) -> OrderResult | None:
    """Before a keyed request is refused, make sure its key has no order: the
    database is the truth for idempotency. The flags answer for it (no look-up) only
    while the sale's mark vouches that no flag was lost; then this request's fresh
    claim means the key has none. Returns the order's replay if it has one; else the
    key is freed, so a retry may try again."""
    known = None
    if isinstance(error, ApplicationError) and not mark.flags_complete:
        try:
            known = _replay_by_key(key=key, fingerprint=fingerprint)
        except IdempotencyConflict:
            raise  # the key has an order, and its flag again
        except BaseException:
            _free(key, deadline)
            raise
    if known is None:
        _free(key, deadline)
    return known


def _free(key: str, deadline: float) -> None:
    """Drop this request's claim of ``key``, if it is still this request's: past the
    deadline, the claim may have gone stale and been taken over by a retry (whose
    order's flag it now is), so it is left to go stale instead."""
    if time.monotonic() < deadline:
        flags_forget(keys=[key])


def sale_reset(*, sku: str, stock: int, name: str | None = None, segments: int | None = None,
               starts_at: datetime | None = None, ends_at: datetime | None = None,
               strategy: str | None = None) -> Product:
    """Create or reset a product to ``stock`` units in ``segments`` rows, clearing its
    orders and ledger; under the gate, load the stock into Redis as a new sale. The
    sale opens at ``starts_at`` (default: at once) and closes at ``ends_at`` (never);
    an end at or before the start or now makes a closed sale (a way to close one).
    It runs under ``strategy``; without one, under the deployment's
    (``FLASHSALE_STRATEGY``, whatever it is when a purchase comes).

    :raises InvalidInput: an unknown strategy; segments for a strategy that keeps the
        stock in one counter.
    :raises Unavailable: the gate's Redis cannot be reached (the sale is not open).
    """
    try:
        own = strategy_of(strategy or "")
    except UnknownStrategy as e:
        raise InvalidInput(str(e), extra={"fields": {"strategy": [str(e)]}}) from None
    # In whole milliseconds, as the gate's script keeps them: one window everywhere.
    starts_at, ends_at = (t and t.replace(microsecond=t.microsecond // 1000 * 1000)
                          for t in (starts_at, ends_at))
    gated = own.seller is Seller.GATE
    if gated and (segments or 1) > 1:
        raise InvalidInput("the gate keeps a product's stock in one Redis counter: segments are for the "
                           "strategies that lock the database's stock rows",
                           extra={"fields": {"segments": ["must be 1 under the gate"]}})
    # First, so that no purchase is accepted into the sale being wiped: until the new
    # one opens, the product is cold (503).
    closed = gate_close(sku=sku, required=gated or GateSale.objects.filter(product__sku=sku).exists())
    for attempt in range(1, RESET_ATTEMPTS + 1):
        try:
            product, keys, sale = _reset_rows(sku=sku, stock=stock, name=name, segments=segments, gated=gated,
                                              starts_at=starts_at, ends_at=ends_at, strategy=strategy)
            break
        except DatabaseError as e:
            # Its deletes take gap locks beside the rows the persisters and buyers of
            # other products insert, so InnoDB may pick it as a deadlock's victim; or
            # a reset of the same new product created it first. All of it was rolled
            # back: done again (another failure reaches the caller, 503).
            outer = transaction.get_connection().in_atomic_block  # then the victim is the caller's
            if not (database_deadlocked(e) or isinstance(e, IntegrityError)) or outer \
                    or attempt == RESET_ATTEMPTS:
                raise
            why = "a deadlock's victim" if database_deadlocked(e) else "beaten to the new product's row"
            logger.info("%s: the reset was %s (try %d), doing it again", sku, why, attempt)
    flags_forget(keys=keys)
    window = SaleWindow.of(product)
    sale_mark_open(sku=sku, window=window, strategy=product.strategy)
    if sale is not None:
        gate_open(sale=sale, window=window)
    product_cached_refresh(sku=sku)
    gate_settle(closed)  # no process answers from the old sale after this answer
    return product


# Tries of a reset's transaction, for a deadlock's victim.
RESET_ATTEMPTS = 3


@transaction.atomic
def _reset_rows(*, sku: str, stock: int, name: str | None, segments: int | None, gated: bool,
                starts_at: datetime | None, ends_at: datetime | None, strategy: str | None
                ) -> tuple[Product, list[str], GateSale | None]:
    """The reset's rows, in one transaction: the sale's orders and quotas gone, the
    product and its stock as new. Returns the product, the keys of the orders it
    deleted, and the gate sale it opened (under the gate)."""
    try:
        existing = product_get(sku=sku)
    except NotFound:
        existing = None  # nothing refers to it: no deletes, so no locks at the indexes' ends
    keys = []
    if existing is not None:
        # Before the orders: this waits for a persister's batch of the product to
        # commit (it holds the sale's row), and then deletes what it wrote.
        GateSale.objects.filter(product=existing).delete()
        orders = Order.objects.filter(product=existing)
        keys = list(orders.values_list("idempotency_key", flat=True))
        orders.delete()
        BuyerQuota.objects.filter(product=existing).delete()
    product = product_reset(sku=sku, stock=stock, name=name, segments=1 if gated else segments,
                            starts_at=starts_at, ends_at=ends_at, strategy=strategy or "",
                            new=existing is None)
    sale = GateSale.objects.create(product=product, loaded_stock=stock) if gated else None
    return product, keys, sale


def gate_warm(*, sku: str) -> GateSale:
    """Open a gate sale of what the database has left of ``sku``, with its orders'
    keys (so their replays are answered): after Redis lost the sale (a restart
    without its AOF). What Redis accepted and no persister wrote is lost with it;
    anything still in the stream must be written first.

    :raises NotFound: no such product.
    :raises InvalidInput: not a gate product, or Redis still holds its sale.
    :raises Unavailable: the gate's Redis cannot be reached.
    """
    # Processes may remember the lost sale sold out: none does after this answer.
    settled = time.monotonic() + settings.FLASHSALE_GATE_SOLD_OUT_MEMORY
    segments = segments_get(sku=sku)
    strategy = strategy_of(segments[0].product.strategy)
    if strategy.seller is not Seller.GATE:
        raise InvalidInput(f"{sku} sells under {strategy.name}: it does not sell through the gate")
    if len(segments) > 1:
        raise InvalidInput(f"{sku} has {len(segments)} stock segments: reset it under the gate instead")
    if gate_tally(sku=sku) is not None:
        raise InvalidInput(f"Redis holds a sale of {sku} already: reset the product to start over")
    product = segments[0].product
    sale = GateSale.objects.create(product=product, loaded_stock=segments[0].quantity)
    keys, bought = keys_of_orders(product)
    gate_open(sale=sale, window=SaleWindow.of(product), keys=keys, bought=bought)
    gate_settle(settled)
    return sale
