"""The orders side of an audit, for inventory's tests that have no orders: the
references they say were sold, matched against the ledger as the orders app's join
matches its orders' ids."""

from collections.abc import Collection

from inventory.models import StockFlow
from inventory.selectors import LedgerMatch


def ledger_of(product, references: Collection[str]) -> LedgerMatch:
    naming = [r for r in StockFlow.objects.filter(product=product).values_list("order_reference", flat=True)
              if r in set(references)]
    return LedgerMatch(orders=len(set(references)), named=len(set(naming)), naming_rows=len(naming))
