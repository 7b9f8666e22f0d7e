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
