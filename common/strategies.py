"""The concurrency strategies a deployment can run, and what each one is made of.

A strategy names its seller, the shape of a purchase: the locked transaction
(lock, transaction, deduct, commit, release) or the gate (Redis decides, a
persister writes the order later). For the locked transaction it names two more
choices: which lock (a ``settings.LOCKING`` alias; ``null`` for none) guards the
critical section, and how the stock row is written inside it. The table is plain
data, imported by settings, so an unknown name fails at start-up rather than on
the first purchase.
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


class Seller(enum.StrEnum):
    """Who sells a product's stock, and so who holds its every move: taken, given
    back, taken again."""

    # Lock, transaction, deduct, commit, release: the order is in the database when
    # the buyer hears 201.
    TRANSACTION = "transaction"
    # One Redis script takes the unit and appends the order to a stream; a persister
    # writes it to the database in batches (``orders.gate``: its ``lifecycle`` and ``persister``).
    GATE = "gate"


@dataclass(frozen=True)
class StrategySpec:
    name: str
    deduction: Deduction
    # Whether the strategy claims to prevent oversell; runners gate on it.
    claims_correct: bool
    summary: str
    # The ``settings.LOCKING`` alias that guards the critical section; the strategies
    # that take no lock share the null lock's.
    lock: str = "null"
    seller: Seller = Seller.TRANSACTION

    @property
    def gated(self) -> bool:
        """Whether its sales live in the gate's Redis (``orders.gate``), decided there
        and written to the database afterwards. (What else a seller does:
        ``orders.sellers``.)"""
        return self.seller is Seller.GATE

    @property
    def segmented(self) -> bool:
        """Whether a product's stock may be split into segments (article 004): they let
        several lock holders in at once. The gate keeps one counter in Redis."""
        return self.seller is Seller.TRANSACTION

    @property
    def one_trip(self) -> bool:
        """Whether a purchase from one segment runs as one stored-procedure call
        (``orders.transaction.procedure``): the conditional UPDATE needs no Python between its
        statements, neither a lock's check nor a value computed from a read."""
        return self.seller is Seller.TRANSACTION and self.deduction is Deduction.CONDITIONAL_UPDATE


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
            lock="local",
            deduction=Deduction.READ_MODIFY_WRITE,
            claims_correct=False,
            summary="a process-local threading.Lock: correct in one process, "
            "oversells across workers and instances",
        ),
        StrategySpec(
            name="setnx",
            lock="setnx",
            deduction=Deduction.READ_MODIFY_WRITE,
            claims_correct=True,
            summary="Redis SET NX PX with a per-holder token, polled; Lua compare-and-delete "
            "release: correct while the holder finishes within the ttl",
        ),
        StrategySpec(
            name="redisson",
            lock="redisson",
            deduction=Deduction.READ_MODIFY_WRITE,
            claims_correct=True,
            summary="Redisson-style reentrant Redis hash lock with a watchdog-renewed lease "
            "and pub/sub wake-ups",
        ),
        StrategySpec(
            name="redisson-fair",
            lock="redisson-fair",
            deduction=Deduction.READ_MODIFY_WRITE,
            claims_correct=True,
            summary="redisson with a line of waiters (Redisson's fair lock): first come, "
            "first served; a release wakes the first in line only",
        ),
        StrategySpec(
            name="zookeeper",
            lock="zookeeper",
            deduction=Deduction.READ_MODIFY_WRITE,
            claims_correct=True,
            summary="kazoo's lock recipe: ephemeral sequential node, each waiter watching "
            "its predecessor only",
        ),
        StrategySpec(
            name="mysql",
            lock="mysql",
            deduction=Deduction.READ_MODIFY_WRITE,
            claims_correct=True,
            summary="a unique-key INSERT into a lock table inside the purchase transaction; "
            "the commit releases it",
        ),
        StrategySpec(
            name="mysql-for-update",
            lock="mysql-for-update",
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
        StrategySpec(
            name="gate",
            # The persister's: one conditional UPDATE per batch of orders.
            deduction=Deduction.CONDITIONAL_UPDATE,
            claims_correct=True,
            summary="one Redis Lua script takes the unit and appends the order to a stream; "
            "persisters write the stream to MySQL in batches",
            seller=Seller.GATE,
        ),
    )
}


STRATEGY_NAMES = tuple(STRATEGIES)


class UnknownStrategy(ValueError):
    pass


def strategy_get(name: str) -> StrategySpec:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise UnknownStrategy(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}") from None


def strategy_of(own: str) -> StrategySpec:
    """A product's strategy: its own (``Product.strategy``, set by its reset), or,
    when it has none (""), the deployment's default, ``FLASHSALE_STRATEGY``."""
    from django.conf import settings  # not at import: the settings module imports this one

    return strategy_get(own or settings.FLASHSALE_STRATEGY)
