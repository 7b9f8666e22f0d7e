"""The comparison's payment mode (``loadtest.compare --mode payment``): what a sale with
a payment window came to, read from MariaDB once its orders settled, and its table."""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass

import requests

from stack.config import StackConfig

from .truth import Truth


@dataclass(frozen=True)
class PaymentFigures:
    stock: int
    orders: int
    paid: int  # orders paid, in time or late
    paid_late: int  # of them, paid after they expired: their units taken again
    expired: int
    refunded: int
    pending: int  # still waiting at the end (none, once settled)
    returned: int  # units the ledger gave back
    resold: int  # units sold again after they came back
    resale_p50_s: float  # from a unit's return to its sale again, matched in time order
    resale_max_s: float
    oversold: int
    consistent: bool
    seconds: float  # the Locust run
    # Payments the provider took whose webhook was not handled by the end, and those
    # refunded because their order expired and its units were sold meanwhile.
    payments_unsettled: int = 0
    payments_refunded: int = 0
    delivered_s: float = 0.0  # from the run's end until the provider had delivered every webhook

    @property
    def paid_is_stock(self) -> bool:
        return self.paid == self.stock

    def as_dict(self) -> dict:
        return {**asdict(self), "paid_is_stock": self.paid_is_stock}


def resale_delays(events: list[tuple[float, str, int]]) -> list[float]:
    """Seconds from each returned unit to the sale that took it again: ``events`` are
    the ledger's rows (time, kind, units) in time order; each sale after a return
    takes the oldest returned units first."""
    waiting: list[float] = []  # a time per returned unit not sold again yet
    delays = []
    for at, kind, units in events:
        if kind == "return":
            waiting.extend([at] * units)
        else:
            for _ in range(min(units, len(waiting))):
                delays.append(at - waiting.pop(0))
    return delays


def delivered(config: StackConfig, *, within: float) -> float:
    """Wait until the provider's stand-in has no webhook delivery waiting or under way
    (its ``GET /_stand-in/deliveries``), so that what a row reads is what its webhooks
    did, and none is left to land in the next row; the seconds that took.

    :raises RuntimeError: deliveries still wait after ``within`` seconds.
    """
    started = time.monotonic()
    url = f"http://127.0.0.1:{config.payprovider_port}/_stand-in/deliveries"
    headers = {"Authorization": f"Bearer {config.payments_api_key()}"}
    while True:
        response = requests.get(url, headers=headers, timeout=5)
        response.raise_for_status()
        deliveries = response.json()
        waited = time.monotonic() - started
        if not deliveries["waiting"] and not deliveries["under_way"]:
            return waited
        if waited > within:
            raise RuntimeError(f"the provider's stand-in still has {deliveries['waiting']} webhook "
                               f"deliveries waiting and {deliveries['under_way']} under way after "
                               f"{within:g} s")
        time.sleep(0.25)


def settled(truth: Truth, sku: str, *, within: float) -> None:
    """Wait until no order of ``sku`` is pending (webhooks in flight, the last unpaid
    ones expiring), for ``within`` seconds at most."""
    deadline = time.monotonic() + within
    while truth.statuses(sku).get("pending", 0) and time.monotonic() < deadline:
        time.sleep(0.25)


def payment_figures(truth: Truth, sku: str, *, stock: int, audit: dict, seconds: float,
                    delivered_s: float = 0.0) -> PaymentFigures:
    statuses = truth.statuses(sku)
    ledger = truth.ledger(sku)
    delays = resale_delays(ledger)
    payments = truth.payments(sku)
    returned = sum(units for _, kind, units in ledger if kind == "return")
    return PaymentFigures(
        stock=stock, orders=sum(statuses.values()), paid=statuses.get("paid", 0),
        paid_late=truth.paid_late(sku),
        expired=statuses.get("expired", 0), refunded=statuses.get("refunded", 0),
        pending=statuses.get("pending", 0), returned=returned, resold=len(delays),
        resale_p50_s=statistics.median(delays) if delays else float("nan"),
        resale_max_s=max(delays) if delays else float("nan"),
        oversold=audit["oversold"], consistent=audit["consistent"], seconds=seconds,
        payments_unsettled=payments.get("started", 0), payments_refunded=payments.get("refunded", 0),
        delivered_s=delivered_s)


def payment_table(rows: list[tuple[str, PaymentFigures]]) -> str:
    header = ("| strategy | orders | paid | of them late | expired | refunded | units returned | resold "
              "| expiry → resale, p50 / max s | paid = stock | oversold | ledger consistent |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
    lines = [header]
    for label, f in rows:
        lines.append(f"| {label} | {f.orders} | {f.paid} | {f.paid_late} | {f.expired} | {f.refunded} | "
                     f"{f.returned} | {f.resold} | "
                     f"{f.resale_p50_s:.1f} / {f.resale_max_s:.1f} | {'yes' if f.paid_is_stock else 'NO'} | "
                     f"{f.oversold} | {'yes' if f.consistent else 'NO'} |")
    return "\n".join(lines)
