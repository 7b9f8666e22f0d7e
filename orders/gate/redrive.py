"""The gate's dead letters written again, by an operator, once what refused them is
fixed (``manage.py gate_redrive``): each as a persister writes it
(``orders.gate.persister``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from common.gateredis import stream_entries

from .intents import Intent, intents_write
from .store import gate_keys, gate_redis

logger = logging.getLogger(__name__)


@dataclass
class Redriven:
    """What a redrive of a sale's dead letters came to, by order id."""

    written: list[int] = field(default_factory=list)  # now in MySQL
    already: list[int] = field(default_factory=list)  # were in MySQL already (written by hand, or twice)
    closed: list[int] = field(default_factory=list)  # of a sale since reset: nothing to write
    # Still refused, and why: left dead-lettered (a letter without an intent: by the
    # order its entry names, else by its own id).
    refused: dict[int | str, str] = field(default_factory=dict)


def dead_letters_redrive(*, sku: str) -> Redriven:
    """Write ``sku``'s dead-lettered orders again, once what refused them is fixed.

    Each is written as a persister writes it, in its own transaction: an order already
    in MySQL is not written twice (its id is the gate's), so a redrive run twice, or
    beside a persister, still makes one order. A letter whose order is now in MySQL,
    or whose sale has since been reset, leaves the dead-letter stream and its order is
    marked accepted again; one the database still refuses stays, with the new reason.

    :raises DatabaseError: the database cannot be reached: nothing more is decided,
        and what was decided before stays decided.
    """
    keys = gate_keys(sku)
    client = gate_redis()
    outcome = Redriven()
    for letter_id, fields in stream_entries(client.xrange(keys.dead)):
        if fields is None:
            continue  # XRANGE gives none such: only a consumer's pending entries lose theirs
        try:
            intent = _dead_intent(fields)
        except ValueError as e:
            outcome.refused[fields.get("order", letter_id)] = str(e)
            continue
        written = intents_write([intent])
        if written.dead:
            outcome.refused[intent.order_id] = written.dead[0][1]
            continue
        for name in ("written", "already", "closed"):
            if getattr(written, name):
                getattr(outcome, name).append(intent.order_id)
        # Out of the dead-letter stream, and accepted again in the orders' index
        # (the order's status now reads from MySQL, which has it).
        with client.pipeline(transaction=True) as pipe:
            pipe.xdel(keys.dead, letter_id)
            pipe.hset(keys.orders, str(intent.order_id), intent.entry_id)
            pipe.execute()
        logger.warning("redrive: dead-lettered order %s of %s %s", intent.order_id, sku,
                       "written" if written.written else "already written" if written.already
                       else "of a closed sale")
    return outcome


def _dead_intent(fields: dict[str, str]) -> Intent:
    """The intent a dead letter carries: the refused intent's own fields, or the
    stream entry's if it could not be read as one (then it raises again).

    :raises ValueError: the letter holds no intent.
    """
    if "order_id" not in fields:
        return Intent.parse(fields["entry"], fields)
    try:
        return Intent(entry_id=fields["entry_id"], order_id=int(fields["order_id"]), key=fields["key"],
                      user_id=fields["user_id"], quantity=int(fields["quantity"]),
                      before=int(fields["before"]), after=int(fields["after"]), instance=fields["instance"],
                      request=fields.get("request", ""))  # a letter older than the field has none
    except (KeyError, ValueError) as e:
        raise ValueError(f"a dead letter without its intent: {fields!r}") from e
