"""The waiting room's queue in the gate's Redis (``common.gateredis``), beside the
gate's sales: one key set per sale under the sale's hash tag, two scripts (``lua/``),
Redis's clock. A gate purchase spends its admission in the sale's own script
(``orders/gate/lua/sell.lua``, with ``spend_keys``); any other in ``use.lua``.

Failure semantics: every change is one script, so a connection that dies mid-call
leaves the room as it was or as the script left it, never half. Redis lost (a restart
without persistence) loses the queue: the next ask finds no room and the service opens
it again, empty, under a new sale (``waitingroom.services``); every place and admission
of the old one is gone, and its tokens are refused.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.commands.core import Script
from redis.typing import EncodableT, FieldT

from common.challenges import Proof
from common.gateredis import gate_redis, sku_tag, text
from common.scripts import script_on

LUA = Path(__file__).resolve().parent / "lua"
# The spend, a Lua function every seller's script calls: use.lua's, and the gate's
# sale script (orders.gate.store).
SPEND_LUA = (LUA / "spend.lua").read_text()
_ASK = (LUA / "ask.lua").read_text()
_USE = SPEND_LUA + (LUA / "use.lua").read_text()
# The room written only if Redis has none (an instance that found it lost; another may
# have written it first, and buyers may have asked it since).
_REOPEN = """if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1"""
# Places skipped in one ask at most: an opening's abandoned places are skipped over
# many asks, and no ask holds Redis long.
MOST_SKIPS = 100
# A waiting buyer asks again after its wait at the room's rate over 4, no sooner
# and no later than these: a crowd far back asks seldom (``ask_interval_ms``).
ASK_LEAST_MS, ASK_MOST_MS = 2_000, 60_000

_PARTS = ("room", "places", "queue", "asked", "active", "admitted", "addresses", "used", "origins")


def _keys(sku: str, parts: tuple[str, ...]) -> list[str]:
    """``parts`` of the sale's keys, in the Cluster slot of the gate's keys of the sale."""
    tag = sku_tag(sku)
    return [f"room:{tag}:{part}" for part in parts]


def room_keys(sku: str) -> dict[str, str]:
    """The sale's keys, by part."""
    return dict(zip(_PARTS, _keys(sku, _PARTS), strict=True))


# What a purchase's spend reads and writes, in the order use.lua and sell.lua take them.
_SPEND = ("room", "active", "admitted", "used")


def spend_keys(sku: str) -> list[str]:
    """The keys an admission's spend needs (``lua/use.lua``'s KEYS; the gate's sale
    script takes them after its own): on every purchase with an admission, so only these."""
    return _keys(sku, _SPEND)


def ask_interval_ms(ahead: int, rate: int) -> int:
    """When a buyer with ``ahead`` places before it, at ``rate`` admissions a second, is
    told to ask again (``lua/ask.lua`` computes the same)."""
    if rate <= 0:
        return ASK_LEAST_MS
    return min(max(ahead * 250 // rate, ASK_LEAST_MS), ASK_MOST_MS)


@dataclass(frozen=True)
class Asked:
    state: str  # none, outside, bounded, challenge, spent, waiting, admitted, expired, used
    position: int
    ahead: int  # places before this one still in the queue (some may be skipped yet)
    admission_ends_ms: int  # 0 unless admitted
    now_ms: int  # Redis's clock
    sale: str  # the room's sale: what a token names
    rate: int  # admissions a second
    # What this ask did: whether it took a place, and how many places it admitted and skipped.
    joined: int = 0
    admitted: int = 0
    skipped: int = 0
    again_ms: int = 0  # waiting: when this buyer is to ask again (a place later than that is skipped)


def _client() -> redis.Redis:
    return gate_redis()


def _script(source: str) -> Script:
    return script_on(_client(), source)


def _fields(**terms: int | str) -> dict[FieldT, EncodableT]:
    fields: dict[FieldT, EncodableT] = {}
    fields.update(terms)
    fields.update(next=0, credit=0)  # a new room's queue starts at its head
    return fields


def room_write(*, sku: str, **terms: int | str) -> None:
    """A new, empty room for ``sku``'s sale (``terms``: its sale, rate, active,
    admission_ms, abandon_ms, per_address, order, challenge_bits); the old one's keys go."""
    keys = room_keys(sku)
    pipe = _client().pipeline(transaction=True)
    pipe.delete(*keys.values())
    pipe.hset(keys["room"], mapping=_fields(**terms))
    pipe.execute()


def room_reopen(*, sku: str, **terms: int | str) -> bool:
    """``room_write``, unless Redis has the room already: whether it wrote it."""
    args = [part for pair in _fields(**terms).items() for part in pair]
    return bool(_script(_REOPEN)(keys=[room_keys(sku)["room"]], args=args))


def room_drop(*, sku: str) -> None:
    _client().delete(*room_keys(sku).values())


def room_ask(*, sku: str, buyer: str, address: str, join: bool, proof: Proof | None = None) -> Asked:
    """``buyer``'s ask (``lua/ask.lua``). ``proof``: the work it showed, checked
    offline (``common.challenges.challenge_read``); a room that asks for work takes a
    new place only with enough of it (else ``challenge``), and one place a proof
    (else ``spent``)."""
    keys = _keys(sku, (*_PARTS, f"proof:{proof.challenge_id if proof else ''}"))
    state, position, ahead, ends, now, sale, *numbers = _script(_ASK)(
        keys=keys, args=[buyer, address, "1" if join else "0", MOST_SKIPS, repr(random.random()),
                         proof.bits if proof else 0, proof.ttl_s if proof else 1, ASK_LEAST_MS, ASK_MOST_MS])
    return Asked(state, int(position or 0), int(ahead), int(ends), int(now), sale, *map(int, numbers))


def room_join_many(*, sku: str, buyers: Sequence[str]) -> int:
    """A place for each of ``buyers`` (``room_ask``'s join, no address counted, no
    proof shown), the asks sent together in one round trip: a room filled in bulk
    (``benchmarks.room_million``). How many took a new place."""
    client = _client()
    ask = script_on(client, _ASK)
    keys = _keys(sku, (*_PARTS, "proof:"))
    pipe = client.pipeline(transaction=False)
    for buyer in buyers:
        ask(keys=keys, args=[buyer, "", "1", MOST_SKIPS, repr(random.random()), 0, 1, ASK_LEAST_MS,
                             ASK_MOST_MS], client=pipe)
    return sum(int(reply[7]) for reply in pipe.execute())


def admission_use(*, sku: str, buyer: str, sale: str, key: str) -> str:
    """Spend ``buyer``'s admission for the purchase ``key``: 'ok', or why not (``lua/use.lua``)."""
    return text(_script(_USE)(keys=spend_keys(sku), args=[buyer, sale, key]))


# A purchase's spend undone: the admission buys again, as long as it runs (its slot
# stays freed: the room may have admitted the next buyer with it).
_UNSPEND = """if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1"""


def admission_unspend(*, sku: str, buyer: str, key: str) -> bool:
    """Undo the spend of ``buyer``'s admission by the purchase ``key`` (False: not spent by it)."""
    return bool(_script(_UNSPEND)(keys=[room_keys(sku)["used"]], args=[buyer, key]))


@dataclass(frozen=True)
class RoomCounts:
    waiting: int  # places in the queue (abandoned ones not yet skipped included)
    active: int  # admissions running: admitted, not yet bought, not run out
    admitted: int  # admissions given this sale (those run out and asked again for, gone)


def room_counts(*, sku: str) -> RoomCounts:
    """The room's queue and admissions, as Redis holds them now."""
    keys = room_keys(sku)
    pipe = _client().pipeline(transaction=False)
    pipe.zcard(keys["queue"])
    pipe.zcard(keys["active"])
    pipe.hlen(keys["admitted"])
    return RoomCounts(*pipe.execute())
