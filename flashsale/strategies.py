"""The concurrency strategies a deployment can run, and what each one is made of.

A strategy is two choices: which lock (a ``settings.LOCKING`` alias of the same
name) guards the critical section, and how the stock row is written inside it.
The table is plain data, imported by settings, so an unknown name fails at start-up
rather than on the first purchase.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Deduction(enum.StrEnum):
    """How ``inventory`` writes the stock row inside the critical section."""

    # SELECT, check in Python, UPDATE with the computed value: loses updates unless
    # a lock serialises the whole sequence.
    READ_MODIFY_WRITE = "read_modify_write"
    # One ``UPDATE ... SET quantity = quantity - n WHERE quantity >= n``: the row
    # lock InnoDB takes for the statement is the only protection needed.
    CONDITIONAL_UPDATE = "conditional_update"
    # SELECT, check, then UPDATE ... WHERE version = <read version>: a write that
    # finds the row changed fails (StockChanged) and the purchase is retried.
    VERSIONED = "versioned"


@dataclass(frozen=True)
class StrategySpec:
    name: str
    deduction: Deduction
    # Whether the strategy claims to prevent oversell; runners gate on it.
    claims_correct: bool
    summary: str


STRATEGIES: dict[str, StrategySpec] = {
    spec.name: spec
    for spec in (
        StrategySpec(
            name="none",
            deduction=Deduction.READ_MODIFY_WRITE,
            claims_correct=False,
            summary="nothing protects the stock: oversell under load",
        ),
        StrategySpec(
            name="local",
            deduction=Deduction.READ_MODIFY_WRITE,
            claims_correct=False,
            summary="a process-local threading.Lock: correct in one process, "
            "oversells across workers and instances",
        ),
        StrategySpec(
            name="setnx",
            deduction=Deduction.READ_MODIFY_WRITE,
            claims_correct=True,
            summary="Redis SET NX PX with a per-holder token, polled; Lua compare-and-delete "
            "release: correct while the holder finishes within the ttl",
        ),
        StrategySpec(
            name="redisson",
            deduction=Deduction.READ_MODIFY_WRITE,
            claims_correct=True,
            summary="Redisson-style reentrant Redis hash lock with a watchdog-renewed lease "
            "and pub/sub wake-ups",
        ),
        StrategySpec(
            name="zookeeper",
            deduction=Deduction.READ_MODIFY_WRITE,
            claims_correct=True,
            summary="kazoo's lock recipe: ephemeral sequential node, each waiter watching "
            "its predecessor only",
        ),
        StrategySpec(
            name="mysql",
            deduction=Deduction.READ_MODIFY_WRITE,
            claims_correct=True,
            summary="a unique-key INSERT into a lock table inside the purchase transaction; "
            "the commit releases it",
        ),
        StrategySpec(
            name="mysql-for-update",
            deduction=Deduction.READ_MODIFY_WRITE,
            claims_correct=True,
            summary="SELECT ... FOR UPDATE on a lock row inside the purchase transaction",
        ),
        StrategySpec(
            name="optimistic",
            deduction=Deduction.VERSIONED,
            claims_correct=True,
            summary="no lock: compare-and-set on the stock row's version, bounded retries",
        ),
        StrategySpec(
            name="atomic",
            deduction=Deduction.CONDITIONAL_UPDATE,
            claims_correct=True,
            summary="one conditional UPDATE ... WHERE quantity >= n, no lock",
        ),
    )
}


class UnknownStrategy(ValueError):
    pass


def strategy_get(name: str) -> StrategySpec:
    try:
        return STRATEGIES[name]
    except KeyError:
        choices = ", ".join(STRATEGIES)
        raise UnknownStrategy(f"unknown strategy {name!r}; choose one of: {choices}") from None
