"""Conservation: what the final read says about every unit and every payment, beside
the search's verdict on the answers.

Linearizability judges what the clients were told; conservation judges what the
stores hold once the sale has settled, which no answer shows:

- **Each unit held by at most one live order.** The live orders (``placed``,
  ``pending``, ``paid``; every order in a sale without a window) hold their units,
  numbered in the order of their ids: an order whose units run past the stock holds
  a unit another live order holds too. The violation names the order and the unit.
- **Units back exactly once.** Where the gate sells, its Redis counts what is left
  too; once every return and late payment has reached it, it must say what MariaDB
  says. More there: a unit returned twice (or a late payment's take never made);
  fewer: a unit stranded (an expiry that never reached the rebuilt sale).
- **The money balances.** Per order, what the provider took minus what it gave back
  is the order's price if the order is paid, and nothing otherwise: no buyer is
  charged for an order that is expired, pending or refunded, none pays twice for one
  order, and a paid order is paid for. Summed, what the provider took equals the
  paid orders plus the refunds.
- **A sale's terms hold.** A sale reset to open later (``opens_at``) answers no
  purchase with an order before it opens, and its final read, taken before then,
  holds no order: a purchase that raced the reset onto the old terms shows here.

The history carries what these need in its final read (``common.history.Final``):
the statuses, ``gate_remaining`` and the provider's ``money``.
"""

from __future__ import annotations

from common.history import OK, PAID, Final, Purchase, Reset

from .model import PENDING

LIVE = {"placed", PENDING, PAID}


def conservation(purchases: list[Purchase], final: Final, stock: int) -> list[tuple[str, str]]:
    """What ``final`` breaks: (kind, detail) for each, the detail naming the order."""
    quantity = {op.key: op.quantity for op in purchases}
    found: list[tuple[str, str]] = []
    held = 0
    for key, order_id, *status in sorted(final.orders, key=lambda o: o[1]):
        if status and status[0] not in LIVE:
            continue
        units = quantity.get(key, 1)
        if held + units > stock:
            first = max(held, stock) + 1
            found.append(("unit held twice", f"order {order_id} ({status[0] if status else 'placed'}) "
                                 f"holds unit {first} of {stock}: live orders before it hold "
                                 f"{min(held, stock)} of them, so another live order holds it too"))
        held += units
    if final.gate_remaining is not None and final.gate_remaining != final.remaining:
        apart = final.gate_remaining - final.remaining
        what = (f"{apart} units returned there twice, or taken back here only"
                if apart > 0 else f"{-apart} units stranded: given back here, never there")
        found.append(("gate disagrees", f"the gate's Redis has {final.gate_remaining} left where "
                             f"MariaDB has {final.remaining}: {what}"))
    if final.money is not None and final.unit_price is not None:
        found += _money(final, quantity, final.unit_price)
    return found


def _money(final: Final, quantity: dict[str, int], unit_price: int) -> list[tuple[str, str]]:
    ledger = {order_id: (charged, refunded) for order_id, charged, refunded in final.money}
    wrong: list[str] = []
    for key, order_id, *status in final.orders:
        charged, refunded = ledger.get(order_id, (0, 0))
        kept = charged - refunded
        paid = status[0] == PAID if status else False
        owed = quantity.get(key, 1) * unit_price if paid else 0
        if kept != owed:
            state = status[0] if status else "placed"
            wrong.append(f"order {order_id} is {state} and the provider kept {kept} of its buyer's money "
                         f"(took {charged}, gave back {refunded}), where {owed} is due")
    known = {o[1] for o in final.orders}
    strays = [order_id for order_id in ledger if order_id not in known]
    wrong += [f"the provider charged for order {order_id}, which the sale has not" for order_id in strays]
    if not wrong:
        return []
    more = f" (+{len(wrong) - 1} more)" if len(wrong) > 1 else ""
    return [("money", wrong[0] + more)]


def terms_refused(purchases: list[Purchase], final: Final | None, reset: Reset) -> list[tuple[str, str]]:
    """Orders a sale not open yet holds, or answered: (kind, detail) naming the first."""
    if reset.opens_at is None:
        return []
    answered = [op for op in purchases if op.outcome == OK and op.complete < reset.opens_at]
    held = final.orders if final is not None and final.at < reset.opens_at else []
    wrong = [f"{op.describe()}, before the sale opened" for op in answered]
    wrong += [f"order {o[1]} (key {str(o[0])[:10]}) in the final read, before the sale opened" for o in held]
    if not wrong:
        return []
    more = f" (+{len(wrong) - 1} more)" if len(wrong) > 1 else ""
    return [("refused by its terms", wrong[0] + more)]
