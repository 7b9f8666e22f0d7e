"""The gate's Redis (its client: ``common.gateredis``): the keys of a product's
sale, the order ids' layout and the Lua scripts (``lua/``), for the rest of the room."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from redis.commands.core import Script

from common.gateredis import gate_redis as gate_redis  # the room's client, named here for the room
from common.gateredis import sku_tag
from common.scripts import script_on
from waitingroom.store import SPEND_LUA

# Ids: the sale's block above 25 bits, twice the units sold before below (a reset
# takes at most 10,000,000 units, under 2**24). Below 2**53 for blocks under 2**28,
# so a browser's JSON numbers hold them exactly.
ID_BLOCK_SHIFT = 25
GROUP = "persisters"  # the consumer group every persister reads the streams in
# The persisters' list: sku -> its sale's id, for every sale whose stream may still
# have something to write. A finished sale leaves it (gate_unlist_finished), so a
# persister's round costs the live sales, not every sale ever held. (No hash tag: it
# is never in a script with a product's keys.)
SALES = "gate:sales"
OLD_LIST = "gate:skus"  # its earlier form: a set of skus (gate_list_upgrade)


class GateKeys(NamedTuple):
    sale: str  # hash: stock, loaded, base, accepted (units), opened, starts and ends (epoch ms, "": none)
    keys: str  # hash: Idempotency-Key -> "fingerprint order_id remaining quantity instance"
    orders: str  # hash: order id -> its stream entry id ("dead <id>" once dead-lettered)
    bought: str  # hash: user -> units bought (the per-user limit)
    stream: str  # the order intents, read by the persisters' group
    dead: str  # the intents the persisters could not write, with the reason
    # order id -> "returned" (its units back in stock: it expired unpaid) or "retaken"
    # (paid late: its units out again, or never given back); returns.py
    returns: str


def gate_keys(sku: str) -> GateKeys:
    tag = sku_tag(sku)  # the room's keys share it (waitingroom.store)
    return GateKeys(*(f"gate:{tag}{suffix}" for suffix in ("", ":keys", ":orders", ":bought", ":stream",
                                                          ":dead", ":returns")))


# The scripts, read once from lua/ (each file says its KEYS, its ARGV and its reply).
LUA_DIR = Path(__file__).resolve().parent / "lua"


def lua_source(name: str) -> str:
    return (LUA_DIR / f"{name}.lua").read_text()


# A purchase, after the waiting room's spend it calls (one spend for every seller).
SELL = SPEND_LUA + lua_source("sell")
OPEN = lua_source("open")  # a sale loaded
FINISHED = lua_source("finished")  # whether a sale's stream is done
UNLIST = lua_source("unlist")  # a finished sale off the persisters' list
CLOSE = lua_source("close")  # a sale dropped
SOLD_OUT = lua_source("sold_out")  # what a process remembers of a sold-out sale
RETURN = lua_source("return")  # an expired order's units back in stock, once
RETAKE = lua_source("retake")  # a late payment's units out again, once


def gate_script(source: str) -> Script:
    """The script's handle on the current client, made once (it hashes the source)."""
    return script_on(gate_redis(), source)
