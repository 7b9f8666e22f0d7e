"""Declined payments, counted per order and per buyer: an order that stays payable
after a decline would otherwise test cards without end, each try a request to the
provider on the shop's rate limit. Past a budget the pay endpoint answers 429 with
Retry-After before it asks the provider. A payment that goes through never counts.
Rates are settings (``FLASHSALE_PAY_DECLINES_PER_ORDER``, ``…_PER_BUYER``, DRF's
``"<n>/<period>"``; empty: not counted)."""

from __future__ import annotations

from common.throttles import FailureBudget


class DeclinesPerOrder(FailureBudget):
    scope = "pay-declines-order"
    rate_setting = "FLASHSALE_PAY_DECLINES_PER_ORDER"


class DeclinesPerBuyer(FailureBudget):
    scope = "pay-declines-buyer"
    rate_setting = "FLASHSALE_PAY_DECLINES_PER_BUYER"


def decline_budgets(*, order_id: int, buyer: str | None) -> list[FailureBudget]:
    """The budgets a payment of ``order_id`` by ``buyer`` (None: unknown) counts in."""
    budgets: list[FailureBudget] = [DeclinesPerOrder(str(order_id))]
    if buyer:
        budgets.append(DeclinesPerBuyer(buyer[:64]))
    return budgets
