"""Strategies x nemeses: a short sale each, its history recorded and checked.

Each cell is the chaos runner's sale (``chaos.sale``: buyers that retry with their
key, the fault struck mid-sale) with every try recorded, then the final read; the
history goes to the checker. A cell's row: linearizable or not, the anomalies and
the window where no order gets past, how many operations had unknown outcomes, and
availability: the share of purchases that got a definite answer (an order or
``sold_out``) rather than busy, unavailable or unknown.

The window cells sell with a payment window (``chaos.sale.PaymentWindow``): half the
buyers pay, some as their order falls due, racing the expirer; the unpaid units come
back and a second wave buys them; ``kill-expirer`` kills the expirer with a batch in
hand; ``restart-redis-pending``, ``restart-mariadb-due`` and ``kill-app-paying`` strike
a store or an app with orders pending or falling due; ``webhook-storm`` delivers each
event two or three times at once while buyers pay twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path

from chaos.faults import FAULTS, WINDOW_FAULTS, expected_loss
from chaos.sale import PaymentWindow, sale_under_fault
from chaos.sale import Verdict as EndState
from common.history import FAILED, OK, Purchase, Recorder
from common.strategies import STRATEGIES, StrategySpec
from stack.config import StackConfig
from stack.hosted import HostedApps

from .checker import Verdict, check
from .links import LINK_FAULTS
from .timeline import svg

CALM = "calm"  # no fault: the strategy alone against concurrent buyers
WINDOW = "payment-window"  # no fault, a payment window: pays racing expiries, units sold again
# The chaos runner's faults strike the stack; the link faults, instances on test hosts;
# the window faults, the stack in a sale with a payment window.
NEMESES = [CALM, *FAULTS, *LINK_FAULTS, WINDOW, *WINDOW_FAULTS]
EXPIRY_PAUSE_MS = 1000.0  # the expirer's pause with a batch in hand, where kill-expirer strikes

REDIS_LOCKS = {"setnx", "redisson", "redisson-fair"}  # the lock aliases kept in Redis


def in_zookeeper(spec: StrategySpec) -> bool:
    """Whether the strategy's lock lives in ZooKeeper (test hosts start one only then)."""
    return spec.lock == "zookeeper"


# Faults that strike a server only some strategies use: elsewhere the sale is calm.
ONLY_FOR = {"kill-persister": lambda spec: spec.gated,
            "zk-leader": in_zookeeper,
            # The lesson on leases: the Redis locks, whose holder can outlive its lease.
            "partition-holder-db": lambda spec: spec.lock == "setnx",
            "partition-holder-db-unfenced": lambda spec: spec.lock == "setnx",
            "partition-holder-zk": in_zookeeper,
            "failover-redis-holder": lambda spec: spec.lock == "setnx",
            "failover-redis-holder-unfenced": lambda spec: spec.lock == "setnx",
            "clock-jump-redis": lambda spec: spec.lock == "setnx",
            "clock-jump-redis-unfenced": lambda spec: spec.lock == "setnx",
            "partition-persister-db": lambda spec: spec.gated,
            "failover-gate-redis": lambda spec: spec.gated,
            "failover-gate-redis-unreplicated": lambda spec: spec.gated,
            "failover-gate-shard": lambda spec: spec.gated,
            "failover-gate-shard-unreplicated": lambda spec: spec.gated,
            "failover-gate-redis-pending": lambda spec: spec.gated,
            "failover-gate-shard-pending": lambda spec: spec.gated,
            "restart-redis-pending": lambda spec: spec.gated or spec.lock in REDIS_LOCKS}


def default_plan(strategies: list[str]) -> list[tuple[str, str]]:
    """Every strategy calm; each that claims correctness under every fault that
    strikes what it uses too.
    One that does not is already wrong without a fault: a fault adds nothing to learn."""
    def bites(strategy: str, nemesis: str) -> bool:
        spec = STRATEGIES[strategy]
        return nemesis == CALM or spec.claims_correct and ONLY_FOR.get(nemesis, lambda _: True)(spec)

    return [(s, n) for s in strategies for n in NEMESES if bites(s, n)]


@dataclass
class Cell:
    strategy: str
    nemesis: str
    verdict: Verdict
    end_state: EndState
    history: Path
    operations: int
    unknown: int
    answered: int  # an order or sold_out: a definite answer about the sale
    as_designed: bool = False  # a loss the strategy's design admits (the gate without Redis's data)

    @property
    def availability(self) -> float:
        return self.answered / self.operations if self.operations else 0.0

    @property
    def said(self) -> str:
        """``linearizable`` as plain text, without the table's bold."""
        return self.linearizable.replace("**", "")

    @property
    def linearizable(self) -> str:
        said = {True: "yes", False: "**no**", None: "unknown (search budget)"}[self.verdict.valid]
        return f"{said}, as designed" if self.as_designed and self.verdict.valid is False else said


def hosted(nemesis: str) -> bool:
    """Whether the cell runs on instances of its own on test hosts."""
    return nemesis in LINK_FAULTS


def windowed(nemesis: str) -> bool:
    """Whether the cell's sale has a payment window."""
    return nemesis == WINDOW or nemesis in WINDOW_FAULTS or hosted(nemesis) and LINK_FAULTS[nemesis].window


def hosts_for(nemesis: str, section_delay_ms: float) -> dict:
    """The test hosts' instances a link fault needs: ``HostedApps``'s keywords."""
    fault = LINK_FAULTS[nemesis]
    delay = section_delay_ms if fault.section_delay_ms is None else fault.section_delay_ms
    return dict(section_delay_ms=delay, fenced=fault.fenced, environment=fault.environment,
                sentinel=fault.sentinel, clock=fault.clock, gate_replicas=fault.gate_replicas,
                gate_cluster=fault.gate_cluster, payments=fault.window,
                expiry_pause_ms=EXPIRY_PAUSE_MS if fault.window else 0.0)


def run_cell(config: StackConfig, *, strategy: str, nemesis: str, out: Path, stock: int, buyers: int,
             threads: int, trigger: int, on: HostedApps | None = None) -> Cell:
    """One sale, recorded and checked: on the stack (through nginx), or, for a link
    fault, on the instances ``on`` runs on test hosts."""
    recorder = Recorder()
    first = None
    if hosted(nemesis):
        if in_zookeeper(STRATEGIES[strategy]) and not on.zookeeper:
            raise ValueError(f"{strategy} locks in ZooKeeper: its test hosts need HostedApps(zookeeper=True)")
        if STRATEGIES[strategy].gated and not on.gate:
            raise ValueError(f"{strategy} sells from Redis and a persister writes its orders: its test hosts "
                             "need HostedApps(gate=True)")
        fault, urls = LINK_FAULTS[nemesis].on(on), on.urls
        first = urls[0] if fault.first_app else None
        trigger = trigger if fault.trigger is None else fault.trigger
    else:
        fault, urls = {**FAULTS, **WINDOW_FAULTS}.get(nemesis), None
    window = (PaymentWindow(resale=2 * stock, twice=getattr(fault, "pays_twice", 0.0))
              if windowed(nemesis) else None)
    end_state = sale_under_fault(config, strategy=strategy, fault=fault, stock=stock, buyers=buyers,
                                 threads=threads, trigger=trigger, history=recorder, urls=urls, first=first,
                                 window=window,
                                 **({"database": on.database, "signed_in": on.buyer_auth}
                                    if hosted(nemesis) else {}),
                                 **({"provider": on.provider_url} if hosted(nemesis) and windowed(nemesis)
                                    else {}))
    path = recorder.write(out / f"{strategy}--{nemesis}.jsonl")
    purchases = [e for e in recorder.events if isinstance(e, Purchase)]
    # A loss the cell sets out to show: the gate without Redis's data or a replica
    # waited for, a lock unfenced.
    as_designed = (LINK_FAULTS[nemesis].as_designed if hosted(nemesis)
                   else nemesis != CALM and expected_loss(strategy, nemesis))
    return Cell(strategy, nemesis, check(recorder.events), end_state, path, len(purchases),
                sum(p.outcome not in (OK, FAILED) for p in purchases),
                sum(p.outcome == OK or p.error == "sold_out" for p in purchases), as_designed)


def found(cell: Cell) -> str:
    anomalies = cell.verdict.anomalies
    if not anomalies:
        return ""
    first = anomalies[0]
    more = f" (+{len(anomalies) - 1} more)" if len(anomalies) > 1 else ""
    return f"{first.kind}: {first.detail}{more}"


def struck(cell: Cell) -> str:
    """When the nemesis struck, against the sale's length: a fault that struck after
    the last purchase tested nothing, and the table says so."""
    at, sale = cell.end_state.struck_at, cell.end_state.seconds
    if cell.nemesis in (CALM, WINDOW):  # no fault strikes
        return "—"
    if at is None:
        return "**never**"
    return f"{at:.1f} of {sale:.1f}" + (" (**after the sale**)" if at >= sale else "")


def table(cells: list[Cell]) -> str:
    lines = ["| strategy | nemesis | linearizable | anomaly and its window | operations | unknown "
             "| availability | orders / stock | lying answers | struck s of sale s | check s |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---|---:|"]
    for c in cells:
        seconds = sum(v.seconds for v in c.verdict.skus)
        lines.append(f"| {c.strategy} | {c.nemesis} | {c.linearizable} | {found(c) or '—'} | {c.operations} "
                     f"| {c.unknown} | {c.availability:.0%} | {c.end_state.orders} / {c.end_state.stock} "
                     f"| {c.end_state.lies} | {struck(c)} | {seconds:.2f} |")
    return "\n".join(lines)


def html(cells: list[Cell], *, heading: str) -> str:
    parts = ["<!doctype html><meta charset='utf-8'><title>flashsale verdicts</title>",
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}.no{color:#c62828}</style>",
             f"<h1>Verdicts</h1><p>{escape(heading)}</p><table><tr><th>strategy</th><th>nemesis</th>"
             "<th>linearizable</th><th>anomaly</th><th>operations</th><th>unknown</th><th>availability</th>"
             "<th>struck s of sale s</th><th>history</th></tr>"]
    for c in cells:
        cls = " class='no'" if c.verdict.valid is False else ""
        parts.append(f"<tr><td>{c.strategy}</td><td>{c.nemesis}</td><td{cls}>{c.said}</td>"
                     f"<td>{escape(found(c))}</td><td>{c.operations}</td><td>{c.unknown}</td>"
                     f"<td>{c.availability:.0%}</td><td>{escape(struck(c).replace('**', ''))}</td>"
                     f"<td><a href='{c.history.name}'>{c.history.name}</a></td></tr>")
    parts.append("</table>")
    for c in cells:
        for sku in c.verdict.skus:
            if sku.window is not None:
                parts.append(f"<h2>{c.strategy} × {c.nemesis}</h2><p>{escape(found(c))}</p>")
                parts.append(svg(sku.window, title=f"{c.strategy} x {c.nemesis}: {sku.sku}"))
    return "\n".join(parts)
