"""The seller table: what each seller does with a sale's stock, for the code that
acts on a sale without caring which seller holds it.

A strategy names its seller (``common.strategies``): the locked transaction
(``orders.transaction``) or the gate (``orders.gate``). The purchase, the reset, the
audit, the probes, the race runner and the payments (an expiry's or a refund's units
given back, a late payment's taken again) ask ``seller_of(strategy)`` here, instead
of telling the sellers apart themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from common.strategies import Seller, StrategySpec
from inventory.models import Product, Stock
from inventory.selectors import product_stock_get

from .gate.returns import gate_give_back, gate_owed_pay, gate_owed_sweep, gate_take_again
from .gate.sell import gate_sell
from .gate.tally import gate_tally
from .giveback import Claimed
from .models import Order
from .results import OrderResult, Purchase
from .transaction.giveback import transaction_give_back, transaction_owed_pay, transaction_take_again
from .transaction.sell import transaction_sell


class GiveBack(Protocol):
    def __call__(self, product: Product, *, take: Callable[[], list[Claimed]], refunded: bool,
                 hand: Callable[[int], None]) -> tuple[int, int]: ...


class TakeAgain(Protocol):
    def __call__(self, order: Order, *, claim: Callable[[], bool] = ...,
                 then: Callable[[], None] = ...) -> str | None: ...


@dataclass(frozen=True)
class StockSeller:
    """One seller's row of the table."""

    # The purchase's sale, by this seller; the segments as the door read them (None:
    # not read, or a seller that keeps no rows).
    sell: Callable[[Purchase, list[Stock] | None], OrderResult]
    # What a sale under it has left now, where it keeps the stock.
    stock_left: Callable[[str], int]
    # Whether its sales live in the gate's Redis: a reset closes and opens them there,
    # and an audit without Redis's tally has lost it.
    in_redis: bool
    # The servers its purchases need, as the probes name them ("lock": the strategy's
    # lock's server, if it has one).
    needs: tuple[str, ...]
    # Orders' units back on sale (expired or, ``refunded``, refunded orders'), in the
    # transaction that runs ``take``, which claims the orders and moves their status:
    # (orders, units). ``hand`` hears how many are claimed before their units move.
    give_back: GiveBack
    # A late-paid order's units out of the sale again, ``claim`` first and ``then``
    # last in the transaction that moves the order expired -> paid: ``paid_late``,
    # ``duplicate`` (``claim`` said so), None (the sale has no room: refund it).
    take_again: TakeAgain
    # What earlier give-backs of this process left owed, paid (each expiry pass).
    owed_pay: Callable[[], None]
    # What any process's give-backs left owed, found in the database and paid: how
    # many orders' units it gave back.
    owed_sweep: Callable[[], int]


def _gate_stock_left(sku: str) -> int:
    tally = gate_tally(sku=sku)
    return tally.redis_remaining if tally is not None else 0


def _rows_stock_left(sku: str) -> int:
    return product_stock_get(sku=sku).stock


def _nothing_owed() -> int:
    # The transaction seller's units move in the transaction that moves their orders:
    # nothing is left owed outside it.
    return 0


SELLERS: dict[Seller, StockSeller] = {
    Seller.TRANSACTION: StockSeller(
        sell=transaction_sell, stock_left=_rows_stock_left, in_redis=False,
        needs=("database", "lock"), give_back=transaction_give_back, take_again=transaction_take_again,
        owed_pay=transaction_owed_pay, owed_sweep=_nothing_owed),
    Seller.GATE: StockSeller(
        sell=gate_sell, stock_left=_gate_stock_left, in_redis=True,
        needs=("redis-gate", "redis"), give_back=gate_give_back, take_again=gate_take_again,
        owed_pay=gate_owed_pay, owed_sweep=gate_owed_sweep),
}


def seller_of(strategy: StrategySpec) -> StockSeller:
    return SELLERS[strategy.seller]
