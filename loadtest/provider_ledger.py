"""What the payment provider took and gave back for a sale's orders, read from the
provider itself with Stripe's client library (the stack's stand-in here, Stripe in a
deployment): the money half of a verdict's conservation check."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import stripe


def provider_ledger(base: str, api_key: str, order_ids: Iterable[int]) -> list[tuple[int, int, int]]:
    """``(order_id, charged, refunded)`` in minor units for each of ``order_ids`` the
    provider charged or refunded: every succeeded PaymentIntent whose metadata names
    the order, and every succeeded refund of one."""
    client = stripe.StripeClient(api_key, base_addresses={"api": base})
    wanted = set(order_ids)
    charged: dict[int, int] = defaultdict(int)
    refunded: dict[int, int] = defaultdict(int)
    order_of: dict[str, int] = {}
    for intent in client.v1.payment_intents.list(params={"limit": 100}).auto_paging_iter():
        order_id = _order_id(intent.metadata)
        if order_id in wanted:
            order_of[intent.id] = order_id
            if intent.status == "succeeded":
                charged[order_id] += intent.amount
    for refund in client.v1.refunds.list(params={"limit": 100}).auto_paging_iter():
        order_id = order_of.get(refund.payment_intent)
        if order_id is not None and refund.status == "succeeded":
            refunded[order_id] += refund.amount
    return sorted((o, charged[o], refunded[o]) for o in set(charged) | set(refunded))


def _order_id(metadata) -> int | None:
    try:
        return int(metadata["order_id"])
    except (KeyError, TypeError, ValueError):
        return None
