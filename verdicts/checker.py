"""Is a sale's history linearizable? The Wing–Gong–Lowe search, as Porcupine runs it.

Linearizable: every operation can be given one instant between its invocation and its
completion such that, taken in the order of those instants, the answers are what the
sequential sale (``verdicts.model``) would have given. An ``unknown`` purchase may
take effect or not; a ``failed`` one other than ``sold_out`` is taken to have done
nothing, which the final read checks.

The search (Wing & Gong 1993, Lowe 2017; Porcupine's ``checkSingle``) walks the
history's events in time order, keeping the operations not yet ordered in a linked
list: at a completion it must already have ordered that operation, so it tries each
operation invoked by then, in turn, and backtracks when none fits. A cache of
(operations ordered, state) prunes what it has already tried. Each sku is an object
of its own (P-compositionality: a history is linearizable iff each sku's is), so they
are searched apart. States are sets of model states, which is how an operation that
may or may not have happened is kept deterministic for the cache.

The stock only goes down, so a state with fewer units than the purchases still to be
ordered are known to take (or than a 201 still to be ordered answered, plus its own)
is dropped as it is made: whether an unknown purchase took a unit is settled by the
next 201's ``remaining``, not by trying the refusals around it in every order.

When the search cannot get past a completion, that completion is the furthest any
order reached: the verdict names that operation, the state the search had there, and
the operations around it (the window a timeline draws).

With a payment window the stock also comes back: expiries and late payments are
operations too (``verdicts.model``). An expiry, which no client sees, is placed
anywhere from its order's purchase plus the window and grace to the final read, as the final
read's status allows; the bound above then counts the units expiries still to be
ordered may return. At each point the search tries the expiries after the operations
clients saw (an expirer sweeps now and then). An expiry that may have happened (a
paid order's, its payment late) either came before the payment, which then took the
units back, or after it, and did nothing: one that did nothing before it is the same
as one after it, so that is not tried apart (``verdicts.model``).

The stock has a ceiling too: a sold_out still to order needs fewer units than it
asked for, and a 201 still to order exactly what it answered plus its own, and
before either only the purchases and payments invoked by then can take any. A state
with more units than that, an expiry ordered too soon, is dropped as it is made.

Beside it, the O(n) checks Jepsen runs on a set (when the history has a final read):
every acknowledged order present exactly once at the end, nothing present that no
purchase was answered with or left unknown, stock never below zero; with a window,
every unit either left or held by one pending or paid order.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left, insort
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from common.history import FAILED, OK, PAID, REFUNDED, UNKNOWN, Event, Final, Pay, Purchase, Reset

from .conservation import conservation, terms_refused
from .model import EXPIRED, PENDING, Expire, SaleModel, SaleState, Step

Operation = Purchase | Pay | Expire | Final

CALL, RETURN = 0, 1


@dataclass
class Anomaly:
    kind: str  # "not linearizable", "lost", "duplicated", "unexpected", "negative stock", ...
    sku: str
    detail: str
    ops: list[Purchase | Pay] = field(default_factory=list)


@dataclass
class Window:
    """Where the search stopped: the operation whose answer no order explains, the
    state the furthest order had reached just before it, and every operation whose
    interval meets the stuck one's (those it could have been ordered against)."""
    stuck: Operation
    before: list[SaleState]
    ordered: int  # operations the furthest order had placed
    ops: list[Operation]
    start: int
    end: int


@dataclass
class SkuVerdict:
    sku: str
    linearizable: bool | None  # None: the search ran out of its budget
    operations: int
    unknown: int
    ok: int
    anomalies: list[Anomaly] = field(default_factory=list)
    window: Window | None = None
    searched: int = 0  # states the search cached
    seconds: float = 0.0
    payments: int = 0

    @property
    def valid(self) -> bool:
        return self.linearizable is True and not self.anomalies


@dataclass
class Verdict:
    skus: list[SkuVerdict]

    @property
    def valid(self) -> bool | None:
        if any(v.linearizable is False or v.anomalies for v in self.skus):
            return False
        return None if any(v.linearizable is None for v in self.skus) else True

    @property
    def anomalies(self) -> list[Anomaly]:
        return [a for v in self.skus for a in v.anomalies]


class _Node:
    __slots__ = ("index", "kind", "time", "match", "prev", "next")

    def __init__(self, index: int, kind: int, at: int):
        self.index, self.kind, self.time = index, kind, at
        self.match: _Node | None = None
        self.prev: _Node | None = None
        self.next: _Node | None = None


def check(events: list[Event], *, budget_states: int = 2_000_000, pruned: bool = True) -> Verdict:
    """Check every sku of a history; each must start with its reset. ``pruned``
    False: without the stock's bound (for the benchmark's comparison)."""
    by_sku: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        by_sku[event.sku].append(event)
    return Verdict([check_sku(name, evs, budget_states=budget_states, pruned=pruned)
                    for sku, evs in sorted(by_sku.items()) for name, evs in _sales(sku, evs)])


def _sales(sku: str, events: list[Event]) -> list[tuple[str, list[Event]]]:
    """A sku's history, one sale per reset: each operation in the sale it was invoked
    in (it may have taken effect in the next: then the next's final read shows an
    order no operation of its own placed), the final read in the last. Sales after
    the first are named ``<sku> (sale <n>)``."""
    starts = sorted(e.at for e in events if isinstance(e, Reset))
    if len(starts) < 2:
        return [(sku, events)]
    sales: list[list[Event]] = [[] for _ in starts]
    for event in events:
        at = event.at if isinstance(event, Reset | Final) else event.invoke
        sales[max(bisect_left(starts, at + 1) - 1, 0)].append(event)
    return [(sku if n == 0 else f"{sku} (sale {n + 1})", evs) for n, evs in enumerate(sales)]


def check_sku(sku: str, events: list[Event], *, budget_states: int = 2_000_000,
              pruned: bool = True) -> SkuVerdict:
    started = time.perf_counter()
    resets = [e for e in events if isinstance(e, Reset)]
    finals = [e for e in events if isinstance(e, Final)]
    purchases = [e for e in events if isinstance(e, Purchase)]
    pays = [e for e in events if isinstance(e, Pay)]
    verdict = SkuVerdict(sku, None, len(purchases), sum(p.outcome == UNKNOWN for p in purchases),
                         sum(p.outcome == OK for p in purchases), payments=len(pays))
    if len(resets) != 1 or len(finals) > 1:
        verdict.anomalies.append(Anomaly("malformed", sku, f"{len(resets)} resets and {len(finals)} final "
                                         "reads: a sku's history has one reset and at most one final read"))
        return verdict
    reset, final = resets[0], (finals[0] if finals else None)
    if malformed := _malformed(sku, purchases, pays, final, reset):
        verdict.anomalies.append(malformed)
        return verdict
    at_end: dict[str, list[int]] = defaultdict(list)  # the final read's orders, by key
    for key, order_id, *_ in (final.orders if final else []):
        at_end[key].append(order_id)
    if final is not None:
        verdict.anomalies += _set_checks(sku, purchases, final, at_end, reset.stock)
    if reset.window > 0:
        verdict.anomalies += _payment_checks(sku, pays, final)
    found = conservation(purchases, final, reset.stock) if final is not None else []
    found += terms_refused(purchases, final, reset)
    verdict.anomalies += [Anomaly(kind, sku, detail) for kind, detail in found]
    if reset.window > 0 and any(a.kind in _NO_STATE for a in verdict.anomalies):
        # The model keeps each unit left or held by one pending or paid order, and
        # paid and refunded for good, each by a payment: no order of the operations
        # ends in this final read. (A search would spend its budget finding that out,
        # every maybe-expiry tried both ways before each refusal.)
        verdict.linearizable = False
        verdict.window = Window(final, [], 0, [final], final.at, final.at + 1)
        verdict.anomalies.insert(0, Anomaly("not linearizable", sku, f"the final read ({final.remaining} "
                                            "left) is no state of the sale: see the anomalies after this"))
        verdict.seconds = time.perf_counter() - started
        return verdict
    steps, ends = _steps(purchases, final, at_end)
    if reset.window > 0:
        due_ns = round((reset.window + reset.grace) * 1e9)  # the soonest an order can expire
        steps, ends = _window_steps(steps, ends, purchases, pays, final, due_ns)
    model = SaleModel(reset.segments)
    linearizable, window, searched = _search(steps, ends, model, model.init(reset.stock), budget_states,
                                             pruned=pruned)
    if linearizable is False and pruned:
        # The pruned search finds a dead end as soon as a later answer rules it out; the
        # plain one finds the answer no order gets past, which is what a reader looks for.
        plain, at, more = _search(steps, ends, model, model.init(reset.stock), budget_states, pruned=False)
        searched += more
        if plain is False:
            window = at
    verdict.linearizable, verdict.window, verdict.searched = linearizable, window, searched
    if window is not None:
        verdict.anomalies.insert(0, Anomaly("not linearizable", sku, _explain(window),
                                            [op for op in window.ops if isinstance(op, Purchase | Pay)]))
    verdict.seconds = time.perf_counter() - started
    return verdict


def _malformed(sku: str, purchases: list[Purchase], pays: list[Pay], final: Final | None,
               reset: Reset) -> Anomaly | None:
    """What the search cannot judge, refused with why: a purchase of less than one
    unit (the model's stock would go up), a final read taken while an operation
    was still in flight (it is the state after every operation; one that overlaps
    it may land after it, and an unknown one is taken to have landed before it); with
    payments or a window, a final read without every order's status (expiries are
    known only from it), and a payment for an order no purchase of the sku placed."""
    below = [op for op in purchases if op.quantity < 1]
    if below:
        return Anomaly("malformed", sku, f"{len(below)} purchases of less than one unit "
                       f"(quantity {below[0].quantity}): a purchase takes at least one", below)
    if (pays or reset.window > 0) and (reset.window <= 0 or reset.segments != 1 or final is None
                                       or any(len(o) != 3 for o in final.orders)):
        return Anomaly("malformed", sku, "payments need a sale with a window and one segment, and a final "
                       "read with every order's status", pays)
    if pays:
        known = {o[1] for o in final.orders} | {op.order_id for op in purchases if op.outcome == OK}
        strays = [op for op in pays if op.order_id not in known]
        if strays:
            return Anomaly("malformed", sku, f"{len(strays)} payments for orders no purchase of {sku} placed",
                           strays)
    if final is not None:
        overlapping = [op for op in [*purchases, *pays]
                       if op.invoke >= final.at or (op.complete is not None and op.complete >= final.at)]
        if overlapping:
            return Anomaly("malformed", sku, f"the final read (at {final.at}) overlaps {len(overlapping)} "
                           "operations: it must be taken once every operation has completed", overlapping)
    return None


def _set_checks(sku: str, purchases: list[Purchase], final: Final, at_end: dict[str, list[int]],
                stock: int) -> list[Anomaly]:
    found: list[Anomaly] = []
    acknowledged: dict[str, set[int]] = defaultdict(set)
    for op in purchases:
        if op.outcome == OK:
            acknowledged[op.key].add(op.order_id)
    lost = [op for op in purchases if op.outcome == OK and op.order_id not in at_end.get(op.key, [])]
    if lost:
        found.append(Anomaly("lost", sku, f"{len(lost)} acknowledged orders are not in the final read", lost))
    twice = {k: ids for k, ids in acknowledged.items() if len(ids) > 1}
    if twice:
        ops = [op for op in purchases if op.key in twice and op.outcome == OK]
        found.append(Anomaly("acknowledged twice", sku, f"{len(twice)} keys answered with two orders", ops))
    duplicated = {k: ids for k, ids in at_end.items() if len(ids) > 1}
    if duplicated:
        found.append(Anomaly("duplicated", sku, f"{len(duplicated)} keys have two orders at the end: "
                             + ", ".join(f"{k}: {ids}" for k, ids in list(duplicated.items())[:5])))
    may_have = {op.key for op in purchases if op.outcome in (OK, UNKNOWN)}
    unexpected = [k for k in at_end if k not in may_have]
    if unexpected:
        refused = [op for op in purchases if op.key in set(unexpected)]
        found.append(Anomaly("unexpected", sku, f"{len(unexpected)} orders at the end for keys that were "
                             "only refused (or never sent)", refused))
    if final.remaining < 0:
        found.append(Anomaly("negative stock", sku, f"the final read has {final.remaining} left"))
    negative = [op for op in purchases if op.remaining is not None and op.remaining < 0]
    if negative:
        found.append(Anomaly("negative stock", sku, f"{len(negative)} answers said less than 0 left",
                             negative))
    if final.orders and len(final.orders[0]) == 3:
        quantity = {op.key: op.quantity for op in purchases}
        live = (PENDING, PAID, PLACED)
        held = sum(quantity.get(key, 1) for key, _, status in final.orders if status in live)
        paid = sum(quantity.get(key, 1) for key, _, status in final.orders if status == PAID)
        if paid > stock:
            found.append(Anomaly("oversold", sku, f"{paid} units paid for, of {stock}"))
        if held + final.remaining != stock:
            found.append(Anomaly("unaccounted", sku, f"{final.remaining} left and {held} held by pending or "
                                 f"paid orders, of {stock}: every unit is one or the other"))
    return found


def _steps(purchases: list[Purchase], final: Final | None, at_end: dict[str, list[int]]
           ) -> tuple[list[Step], list[int]]:
    """The operations the search orders, with their completions: refusals that claim
    nothing are left out, and an unknown purchase is resolved where the final read
    settles it (it cannot have placed an order for a key that got a 201: before it,
    the 201 would have been a replay; after it, it was one itself)."""
    created = {op.key for op in purchases if op.outcome == OK and not op.replayed}
    unknown_per_key: dict[str, int] = defaultdict(int)
    for op in purchases:
        if op.outcome == UNKNOWN:
            unknown_per_key[op.key] += 1
    kept: list[tuple[Purchase, str, int | None]] = []
    for op in purchases:
        if op.outcome == FAILED and op.error != "sold_out":
            continue
        if op.outcome != UNKNOWN:
            kept.append((op, "answer" if op.replayed or op.outcome == FAILED else "yes", op.order_id))
        elif op.key in created or (final is not None and op.key not in at_end):
            continue  # it did nothing
        elif final is not None and unknown_per_key[op.key] == 1 and len(at_end[op.key]) == 1:
            kept.append((op, "yes", at_end[op.key][0]))  # the final read shows the order it placed
        else:  # if it placed an order, the one the final read shows for its key
            order_id = at_end[op.key][0] if final is not None and len(at_end[op.key]) == 1 else None
            kept.append((op, "maybe", order_id))
    per_key: dict[str, int] = defaultdict(int)
    replayed = set()
    for op, _, _ in kept:
        per_key[op.key] += 1
        if op.replayed:
            replayed.add(op.key)
    tracked = {k for k, n in per_key.items() if n > 1} | replayed
    last = max([op.complete or op.invoke for op, _, _ in kept] + [0])
    # An unknown purchase took effect, if at all, before the final read; without one, any time.
    horizon = final.at if final is not None else last + 1
    steps, ends = [], []
    for op, effect, order_id in kept:
        steps.append(Step(op, effect, order_id, op.key in tracked))
        ends.append(op.complete if op.outcome != UNKNOWN else max(horizon - 1, op.invoke))
    if final is not None:
        steps.append(Step(final, "answer", None, False, frozenset(tracked)))
        ends.append(final.at + 1)
    return steps, ends


def _window_steps(steps: list[Step], ends: list[int], purchases: list[Purchase], pays: list[Pay],
                  final: Final, due_ns: int) -> tuple[list[Step], list[int]]:
    """The payments and the expiries, added before the final read. An expiry is known
    from the order's status at the end: it happened (expired, refunded), did not
    (pending, or paid by a payment seen landing before the order could be due), or
    may have (paid: in time, or late and taken back).

    The state follows the status of every order a payment touches or whose expiry is
    in doubt. An order that expired unpaid, placed by a 201 answered before it could
    be due, is touched by nothing else: its expiry only gives units back, and such
    expiries of one size are alike (``_search`` orders them earliest first), which
    spares the search every subset of them."""
    read, read_end = steps[-1], ends[-1]
    steps, ends = steps[:-1], ends[:-1]
    quantity, first = {}, {}
    for op in purchases:
        quantity.setdefault(op.key, op.quantity)
        first[op.key] = min(first.get(op.key, op.invoke), op.invoke)
    placing = {op.order_id: op for op in purchases if op.outcome == OK and not op.replayed}
    units = {order_id: quantity.get(key, 1) for key, order_id, _ in final.orders}
    status_at_end = {order_id: status for _, order_id, status in final.orders}
    # A payment of unknown outcome for an order pending or expired at the end did
    # nothing: had it landed, the order would be paid or refunded, which are final.
    # Left out, it spares the search a branch and leaves the order's expiry alike
    # with the others.
    pays = [op for op in pays if op.outcome != FAILED and not (
        op.outcome == UNKNOWN and status_at_end.get(op.order_id) in (PENDING, EXPIRED))]
    paying: dict[int, list[Pay]] = defaultdict(list)
    for op in pays:
        paying[op.order_id].append(op)
    followed: set[int] = set()
    expiries: list[tuple[Step, int]] = []
    for key, order_id, status in final.orders:
        # The order was placed inside the purchase that answered 201 with it (a retry
        # under its key may come long after the key's first try), or, placed by a
        # purchase whose answer was lost, no sooner than the key's first try.
        placed = placing.get(order_id)
        due = (placed.invoke if placed is not None else first.get(key, 0)) + due_ns
        if status == PENDING and not paying[order_id]:
            continue  # nothing moved it: no step names it
        alone = status == EXPIRED and not paying[order_id] and placed is not None and placed.complete < due
        if not alone:
            followed.add(order_id)
        landed = [p.complete for p in paying[order_id] if p.outcome == OK and p.result == PAID]
        if status == PENDING or status == PAID and landed and min(landed) < due:
            continue  # it never expired
        # Paid at the end: an expiry took its units before the payment landed, or did
        # nothing; so it is ordered, if at all, before the first payment seen landing.
        end = min(landed) if status == PAID and landed else final.at - 1
        expiries.append((Step(Expire(final.sku, order_id, due), "maybe" if status == PAID else "yes",
                              order_id, False, units=units[order_id], statused=not alone), end))
    steps = [replace(step, statused=True) if step.order_id in followed else step for step in steps]
    for op in pays:
        steps.append(Step(op, "yes" if op.outcome == OK else "maybe", op.order_id, False,
                          units=units.get(op.order_id, 1), statused=True))
        ends.append(op.complete if op.outcome == OK else max(final.at - 1, op.invoke))
    steps += [step for step, _ in expiries]
    ends += [end for _, end in expiries]  # one due after its end cannot fit, and fails
    steps.append(replace(read, statuses=frozenset(followed)))
    ends.append(read_end)
    return steps, ends


# Anomalies of a final read that no state of a sale with a window can be (an order
# acknowledged and gone among them: no order is ever deleted).
_NO_STATE = {"unaccounted", "payment lost", "paid unpaid", "lost", "no payment step"}
PLACED = "placed"  # an order final at its 201: no payment step


def _payment_checks(sku: str, pays: list[Pay], final: Final) -> list[Anomaly]:
    """Paid and refunded are final, and only a payment makes an order either."""
    found: list[Anomaly] = []
    status = {order_id: s for _, order_id, s in final.orders}
    lost = [op for op in pays if op.outcome == OK and status.get(op.order_id) != op.result]
    if lost:
        found.append(Anomaly("payment lost", sku, f"{len(lost)} payments answered {lost[0].result} for "
                             f"orders that are not, at the end (order {lost[0].order_id}: "
                             f"{status.get(lost[0].order_id, 'gone')})", lost))
    placed = [o for o, s in status.items() if s == PLACED]
    if placed:
        found.append(Anomaly("no payment step", sku, f"{len(placed)} orders final at their 201 in a sale "
                             f"with a payment window (order {placed[0]}: placed)"))
    paying = {op.order_id for op in pays if op.outcome != FAILED}
    unpaid = [o for o, s in status.items() if s in (PAID, REFUNDED) and o not in paying]
    if unpaid:
        found.append(Anomaly("paid unpaid", sku, f"{len(unpaid)} orders paid or refunded at the end that no "
                             f"payment was made for (order {unpaid[0]}: {status[unpaid[0]]})"))
    return found


def _invoked(step: Step) -> int:
    return step.op.at if isinstance(step.op, Final) else step.op.invoke


def client_of(op: Operation) -> str:
    return "final" if isinstance(op, Final) else op.client


def _search(  # noqa: C901 (the backtracking search: its branches are the algorithm's cases)
        steps: list[Step], ends: list[int], model: SaleModel, init: SaleState,
        budget_states: int, *, pruned: bool = True) -> tuple[bool | None, Window | None, int]:
    entries: list[_Node] = []
    for i, step in enumerate(steps):
        call, ret = _Node(i, CALL, _invoked(step)), _Node(i, RETURN, ends[i])
        call.match = ret
        entries += [call, ret]
    # Calls before returns at the same instant: two operations that touch are concurrent.
    entries.sort(key=lambda n: (n.time, n.kind))
    position = {id(n): p for p, n in enumerate(entries)}
    head = _Node(-1, CALL, 0)
    prev = head
    for node in entries:
        prev.next, node.prev = node, prev
        prev = node

    def lift(call: _Node) -> None:
        call.prev.next = call.next
        call.next.prev = call.prev
        ret = call.match
        ret.prev.next = ret.next
        if ret.next is not None:
            ret.next.prev = ret.prev

    def unlift(call: _Node) -> None:
        ret = call.match
        ret.prev.next = ret
        if ret.next is not None:
            ret.next.prev = ret
        call.prev.next = call
        call.next.prev = call

    # Unknown purchases of one kind (same effect, same quantity, a key of their own) all
    # stay open until the end: any of them does what another would. Ordering the
    # earliest invoked first loses no order (swap two and both intervals still hold
    # them), and spares the search every subset of them (it is exponential otherwise).
    alike: dict[int, tuple[tuple, int]] = {}
    ranks: dict[tuple, int] = defaultdict(int)
    for i in sorted(range(len(steps)), key=lambda i: _invoked(steps[i])):
        step = steps[i]
        if (isinstance(step.op, Purchase) and step.op.outcome == UNKNOWN and not step.tracked
                and not step.statused):
            kind = (step.effect, step.op.quantity, ends[i])
        elif isinstance(step.op, Expire) and not step.statused:
            kind = ("expiry", step.units, ends[i])
        else:
            continue
        alike[i] = (kind, ranks[kind])
        ranks[kind] += 1
    taken: dict[tuple, int] = defaultdict(int)  # per kind: how many of its first are ordered

    # The stock only goes down, so a state with fewer units than the purchases still to
    # order are known to have taken cannot lead anywhere: every such purchase needs its
    # units, and a 201 answered r needs r + q left before it. States below that bound
    # are dropped as they are made (Lowe's pruning, with what the model knows), which
    # settles a "maybe" before the search would try the refusals around it in every order.
    # With a window, expiries still to be ordered may bring that many units back first.
    units = [_units(step) if pruned else 0 for step in steps]
    needs = [_need(step) if pruned else 0 for step in steps]
    returns = [step.units if isinstance(step.op, Expire) else 0 for step in steps]
    open_units, open_returns = sum(units), sum(returns)
    open_needs = sorted(n for n in needs if n)
    # Only where units come back: a stock that only goes down is settled by the floor.
    ceiling = _Ceiling(steps, ends, model.segments) if pruned and any(returns) else None

    def bound() -> Callable[[SaleState], bool]:
        least = max(open_units, open_needs[-1] if open_needs else 0) - open_returns
        most = ceiling.most() if ceiling is not None else math.inf
        return lambda state: least <= state.remaining <= most

    def order(i: int) -> None:
        nonlocal open_units, open_returns
        open_units -= units[i]
        open_returns -= returns[i]
        if needs[i]:
            del open_needs[bisect_left(open_needs, needs[i])]
        if ceiling is not None:
            ceiling.order(i)

    def unorder(i: int) -> None:
        nonlocal open_units, open_returns
        open_units += units[i]
        open_returns += returns[i]
        if needs[i]:
            insort(open_needs, needs[i])
        if ceiling is not None:
            ceiling.unorder(i)

    # A payment of a pending order, with nothing else still to order that touches its
    # order, moves only that order's status, which nothing but the final read sees: it
    # is ordered now, like a sold_out every state allows (below), and no other choice is
    # tried in its place.
    touching: dict[int, int] = defaultdict(int)
    for i, step in enumerate(steps):
        if isinstance(step.op, Pay | Expire):
            touching[step.order_id] |= 1 << i

    def settled(i: int, before: frozenset, marked: int) -> bool:
        step = steps[i]
        return (isinstance(step.op, Pay) and step.op.outcome == OK and touching[step.order_id] & ~marked == 0
                and all(state.status_of(step.order_id) == PENDING for state in before))

    # Each state and each set of them is kept once, however many cache entries hold
    # it: a search that spends its budget stays within a few GB.
    same: dict = {}
    states: frozenset = frozenset([init])
    linearized = 0
    cache: set[tuple[int, frozenset]] = set()
    calls: list[tuple[_Node, frozenset, bool, list[frozenset], int, int]] = []
    furthest, furthest_at = -1, None

    def take(entry: _Node, options: list[frozenset]) -> bool:
        """Order ``entry`` with the first of ``options`` (its outcomes' states) not
        tried here before; the others are kept for when the search comes back."""
        nonlocal states, linearized
        marked = linearized | (1 << entry.index)
        while options:
            following, options = options[0], options[1:]
            if not following or (marked, following) in cache:
                continue
            cache.add((marked, following))
            # A sold_out that every state here allows (the stock is below it) is
            # ordered now, and no other choice is tried in its place: it only ever
            # removes states, so any order that places it later works with it here.
            # (An unknown purchase may add states: not it.)
            step = steps[entry.index]
            refusal = isinstance(step.op, Purchase) and step.op.outcome == FAILED
            calls.append((entry, states, refusal and following == states
                          or settled(entry.index, states, marked), options, phase, urgent))
            states, linearized = following, marked
            if entry.index in alike:
                taken[alike[entry.index][0]] += 1
            lift(entry)
            return True
        return False

    # Each point tries the operations a client saw first, and the expiries last (phase
    # 0, then 2), since an expirer sweeps now and then, seldom at the instant an order
    # falls due. Placed as early as it may be, each expiry would give its units back
    # before the sold_outs of the stretch in which the expirer had not come yet, and the
    # search would try them in every subset. When the completion reached is an
    # expiry's, that expiry goes first (phase 1). Every operation is still tried at
    # every point: only the order of the tries changes.
    expiry = [isinstance(step.op, Expire) for step in steps]
    calls_of = {n.match.index: n for n in entries if n.kind == CALL}
    phase, urgent = 0, -1
    entry = head.next
    while head.next is not None:
        if entry.kind == CALL:
            step = steps[entry.index]
            if expiry[entry.index] != (phase > 0) or (phase == 1 and entry.index != urgent):
                entry = entry.next
                continue
            if entry.index in alike and alike[entry.index][1] != taken[alike[entry.index][0]]:
                entry = entry.next  # an earlier one of its kind is still open: order that first
                continue
            order(entry.index)
            options = _options(model, step, states, bound(), same)
            if not take(entry, options):
                unorder(entry.index)
                entry = entry.next
                continue
            if len(cache) > budget_states:
                return None, None, len(cache)
            entry, phase = head.next, 0
        elif phase == 0 and expiry[entry.index]:
            phase, urgent = 1, entry.index
            entry = calls_of[entry.index]
        elif phase < 2:
            entry, phase = head.next, 2
        else:
            # A completion whose operation is not ordered yet: no order gets past here
            # from this state. Remember the furthest such point, then backtrack.
            at = position[id(entry)]
            if at > furthest:
                furthest, furthest_at = at, (entry.index, states, linearized)
            while True:
                if not calls:
                    return False, _window(steps, ends, furthest_at), len(cache)
                entry, states, unchanged, others, phase, urgent = calls.pop()
                linearized &= ~(1 << entry.index)
                if entry.index in alike:
                    taken[alike[entry.index][0]] -= 1
                unlift(entry)
                if others and take(entry, others):  # the same operation, its other outcome
                    entry, phase = head.next, 0
                    break
                unorder(entry.index)
                if not unchanged:
                    entry = entry.next
                    break
    return True, None, len(cache)


def _options(model: SaleModel, step: Step, states: frozenset, fits: Callable[[SaleState], bool],
             same: dict) -> list[frozenset]:
    """The states ``step`` leaves ``states`` in, those without the units that ``fits``
    (at least what is still to take, at most what a refusal ahead allows) dropped:
    one set, or for an expiry that may have happened (a paid order's, its payment
    late) two, tried in turn: the states in which it did nothing (its order paid
    already), then those in which it did. Kept as one set, each such expiry open at
    once would double it."""
    if isinstance(step.op, Expire) and step.effect == "maybe" and step.statused:
        nothing, did = set(), set()
        for state in states:
            for after in model.step(state, step):
                if fits(after):
                    (nothing if after == state else did).add(same.setdefault(after, after))
        return [same.setdefault(frozenset(nothing), frozenset(nothing)),
                same.setdefault(frozenset(did), frozenset(did))]
    following = frozenset(same.setdefault(after, after) for state in states
                          for after in model.step(state, step) if fits(after))
    return [same.setdefault(following, following)]


class _Ceiling:
    """The most units a state may have: a sold_out still to order needs fewer than its
    quantity left just before it, and a 201 still to order answered r needs r + q
    (one segment). Till then only what is ordered before it takes units: purchases
    and payments invoked by its completion. So the stock now is at most that need
    plus what those may take; an expiry done too soon, whose units nothing takes
    before a sold_out, is dropped when it is made, not after every order of the
    operations between them. Each operation the search orders leaves these sums."""

    def __init__(self, steps: list[Step], ends: list[int], segments: int):
        by_invoke = sorted(range(len(steps)), key=lambda i: _invoked(steps[i]))
        self.rank = {i: r for r, i in enumerate(by_invoke)}
        invokes = [_invoked(steps[i]) for i in by_invoke]
        expiring = {step.order_id for step in steps if isinstance(step.op, Expire)}
        self.takes = [_takes(step, expiring) for step in steps]
        self.tree = [0] * (len(steps) + 1)  # a Fenwick tree of the open takes, by invocation
        for i, took in enumerate(self.takes):
            self._add(self.rank[i], took)
        self.cap: dict[int, int] = {}
        self.reach: dict[int, int] = {}
        for i, step in enumerate(steps):
            op = step.op
            if not isinstance(op, Purchase) or op.replayed:
                continue
            if op.outcome == FAILED:
                self.cap[i] = op.quantity - 1
            elif step.effect == "yes" and op.outcome == OK and op.remaining is not None and segments == 1:
                self.cap[i] = op.remaining + op.quantity
            else:
                continue
            self.reach[i] = bisect_left(invokes, ends[i] + 1)
        self.pins = sorted((ends[i], i) for i in self.cap)
        self.ends = ends

    def _add(self, at: int, units: int) -> None:
        at += 1
        while at < len(self.tree):
            self.tree[at] += units
            at += at & -at

    def _sum(self, upto: int) -> int:  # of the first ``upto`` by invocation
        total = 0
        while upto > 0:
            total += self.tree[upto]
            upto -= upto & -upto
        return total

    def order(self, i: int) -> None:
        if self.takes[i]:
            self._add(self.rank[i], -self.takes[i])
        if i in self.cap:
            del self.pins[bisect_left(self.pins, (self.ends[i], i))]

    def unorder(self, i: int) -> None:
        if self.takes[i]:
            self._add(self.rank[i], self.takes[i])
        if i in self.cap:
            insort(self.pins, (self.ends[i], i))

    def most(self) -> float:
        """The bound of the pin that completes first (the tightest, mostly); no bound
        (infinity) with none open."""
        if not self.pins:
            return math.inf
        i = self.pins[0][1]
        return self.cap[i] + self._sum(self.reach[i]) - self.takes[i]


def _takes(step: Step, expiring: set[int]) -> int:
    """The units a step may take: a purchase that may have placed an order, a
    payment that may take its order back (one that may expire first)."""
    op = step.op
    if isinstance(op, Purchase):
        return op.quantity if step.effect in ("yes", "maybe") and not op.replayed else 0
    if isinstance(op, Pay) and step.order_id in expiring:
        return 0 if op.outcome == OK and op.result == REFUNDED else step.units
    return 0


def _units(step: Step) -> int:
    """The units a step is known to take: an order it placed."""
    return step.op.quantity if isinstance(step.op, Purchase) and step.effect == "yes" else 0


def _need(step: Step) -> int:
    """The units that must be left just before a 201 that answered what remained after it."""
    op = step.op
    if isinstance(op, Purchase) and step.effect == "yes" and op.remaining is not None:
        return op.remaining + op.quantity
    return 0


def _window(steps: list[Step], ends: list[int], furthest: tuple[int, frozenset, int]) -> Window:
    stuck, states, linearized = furthest
    start, end = _invoked(steps[stuck]), ends[stuck]
    around = [i for i in range(len(steps)) if _invoked(steps[i]) <= end and ends[i] >= start]
    around.sort(key=lambda i: _invoked(steps[i]))
    return Window(steps[stuck].op, sorted(states, key=lambda s: s.remaining), bin(linearized).count("1"),
                  [steps[i].op for i in around], min([start] + [_invoked(steps[i]) for i in around]),
                  max([end] + [ends[i] for i in around]))


def _explain(window: Window) -> str:
    left = sorted({s.remaining for s in window.before})
    stuck = window.stuck
    what = (f"the final read ({stuck.remaining} left, {len(stuck.orders)} orders)" if isinstance(stuck, Final)
            else stuck.describe())
    return (f"no order of the history gets past {what}: the furthest order had placed {window.ordered} "
            f"operations, leaving {' or '.join(map(str, left))} units; "
            f"{len(window.ops)} operations overlap it")
