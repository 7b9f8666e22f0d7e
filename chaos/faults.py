"""The faults a sale meets, injected into the local stack by signals to the process
groups it started (supervisord starts each server as one): each fault breaks one
server at a chosen moment and brings it back.

``inject`` returns once the servers are broken; ``heal`` brings them back and waits
until it answers its probe. Healing runs in the background while the sale goes on,
after ``down_seconds``, or at the end of the sale for a fault that stays (a killed
instance).
"""

from __future__ import annotations

import dataclasses
import shutil
import signal
import time
from dataclasses import dataclass

import requests
from prometheus_client.parser import text_string_to_metric_families

from common.history import Recorder
from common.strategies import STRATEGIES
from loadtest.client import FlashsaleClient
from stack.config import StackConfig
from stack.control import start_again
from stack.servers import REDIS_SERVERS, redis_data, zookeeper_mode
from stack.supervisor import Supervisor


@dataclass(frozen=True)
class OnSale:
    """The sale a fault strikes: its sku, stock and strategy, where its admin resets it,
    and the history it is recorded in."""

    sku: str
    stock: int
    strategy: str
    base_url: str
    history: Recorder | None


@dataclass(frozen=True)
class Fault:
    name: str
    summary: str
    # Seconds the server stays broken before it is brought back during the sale;
    # None: it stays broken until the sale's end.
    down_seconds: float | None
    # Redis comes back without its data: the gate's sale (only there until written)
    # is lost with it, as the README says; the verdict reports what was lost.
    loses_redis: bool = False
    # In a sale with a payment window: the share of payers that pay twice at once,
    # two tries of one order's payment (``chaos.sale.PaymentWindow.twice``).
    pays_twice: float = 0.0
    # It resets the sale to new terms (a payment window among them): the old sale's
    # orders are cleared, so its 201s name orders gone, and the final read is the new
    # sale's, with each order's status.
    reopens: bool = False
    # Each buyer of the first wave waits up to this long before its purchase (0: all
    # at once), so that purchases keep coming while a slow fault strikes.
    stagger_s: float = 0.0

    def for_sale(self, sale: OnSale) -> Fault:
        """The fault bound to the sale it strikes (only a fault that acts on the sale
        itself needs it)."""
        return self

    def targets(self, config: StackConfig) -> list[str]:
        raise NotImplementedError

    def before_sale(self, config: StackConfig) -> None:
        """A first step, once the sale is open and before its first purchase (none here)."""

    def inject(self, config: StackConfig) -> list[str]:
        """Break the servers; returns their names."""
        raise NotImplementedError

    def heal(self, config: StackConfig, names: list[str]) -> None:
        start_again(config, names)


@dataclass(frozen=True)
class Killed(Fault):
    """SIGKILL to the servers' process groups; started again later (a crash and a restart)."""

    servers: tuple[str, ...] = ()

    def targets(self, config: StackConfig) -> list[str]:
        return list(self.servers)

    def inject(self, config: StackConfig) -> list[str]:
        names = self.targets(config)
        for name in names:
            Supervisor(config).signal_group(name, signal.SIGKILL)
        return names


@dataclass(frozen=True)
class RedisLost(Killed):
    """Both Redis servers SIGKILLed and their data deleted before they start again: a
    lost machine, or a Redis without persistence. Their AOF is what a mere crash keeps."""

    servers: tuple[str, ...] = REDIS_SERVERS
    loses_redis: bool = True

    def inject(self, config: StackConfig) -> list[str]:
        names = self.targets(config)
        for name in names:
            Supervisor(config).kill(name)  # gone before its data is
        for path in redis_data(config):
            shutil.rmtree(path, ignore_errors=True)
        return names


@dataclass(frozen=True)
class ZooKeeperLeaderKilled(Killed):
    def targets(self, config: StackConfig) -> list[str]:
        if config.zk_nodes == 1:
            return ["zookeeper"]  # a standalone server is its own leader
        ports = {f"zk{i + 1}": config.zk_port + i for i in range(config.zk_nodes)}
        return [next(name for name, port in ports.items() if zookeeper_mode(port) == "leader")]


@dataclass(frozen=True)
class Paused(Fault):
    """SIGSTOP to the server's process group, SIGCONT after ``down_seconds`` (a VM
    or a process frozen, then thawed: it comes back believing nothing happened)."""

    server: str = ""

    def targets(self, config: StackConfig) -> list[str]:
        return [self.server]

    def inject(self, config: StackConfig) -> list[str]:
        Supervisor(config).signal_group(self.server, signal.SIGSTOP)
        return [self.server]

    def heal(self, config: StackConfig, names: list[str]) -> None:
        for name in names:
            Supervisor(config).signal_group(name, signal.SIGCONT)


@dataclass(frozen=True)
class ExpirerKilledMidBatch(Killed):
    """SIGKILL to the expirer once it has a batch in hand (claimed, its units not yet
    back everywhere: its ``flashsale_expiry_batch_orders`` gauge says so, and the
    stack's ``FLASHSALE_EXPIRY_PAUSE_MS`` holds it there); started again later. Only
    a sale with a payment window has expiries to strike."""

    servers: tuple[str, ...] = ("expirer",)
    patience: float = 60.0  # seconds to wait for a batch: the first orders' window and grace

    def inject(self, config: StackConfig) -> list[str]:
        until_batch_in_hand(f"http://127.0.0.1:{config.expirer_metrics_port}/metrics", self.patience)
        return super().inject(config)


@dataclass(frozen=True)
class KilledAsOrdersFallDue(Killed):
    """SIGKILL to the servers as the first orders of a sale with a payment window fall
    due: late payments and the expirer's first batch are under way on them (the
    payers pay from a little before the due to a little after; the sale's trigger
    fires with its first orders). Started again ``down_seconds`` later."""

    window_s: float = 2.0  # the sale's payment window (chaos.sale.PaymentWindow.seconds)
    early_s: float = 0.3  # how long before the due it strikes

    def inject(self, config: StackConfig) -> list[str]:
        time.sleep(max(0.0, self.window_s + config.payment_grace_s - self.early_s))
        return super().inject(config)


@dataclass(frozen=True)
class WebhookStorm(Fault):
    """The payment provider's stand-in turned into a storm while the sale runs: every
    event delivered two or three times, by four deliverers at once, each delivery
    held up to 1.5 s first (so copies overtake each other and their successors); and
    half the payers pay twice at once. Calm again at the sale's end (the stack's own
    knobs; what is queued then is still delivered, each copy)."""

    storm: tuple[tuple[str, str], ...] = (("duplicate", "1.0"), ("copies", "3"), ("workers", "4"),
                                         ("delay_ms", "1500"))
    pays_twice: float = 0.5

    def targets(self, config: StackConfig) -> list[str]:
        return ["payprovider"]

    def inject(self, config: StackConfig) -> list[str]:
        _knobs(config, dict(self.storm))
        return self.targets(config)

    def heal(self, config: StackConfig, names: list[str]) -> None:
        _knobs(config, {"duplicate": str(config.payprovider_duplicate), "copies": "2",
                        "workers": str(config.payprovider_workers),
                        "delay_ms": str(config.payprovider_delay_ms)})


@dataclass(frozen=True)
class ResetUnderLoad(Fault):
    """The operator resets the sale to new terms while buyers buy it: as many units,
    on sale in an hour, behind a waiting room, each order with a payment window. The
    new sale must hold no order and answer none: a purchase that raced the reset onto
    the old terms shows in its final read. The history records the new sale's reset
    at the reset's answer, opening an hour after its request."""

    terms: tuple[tuple[str, int], ...] = (("starts_in", 3600), ("room_rate", 1), ("payment_window_s", 300))
    reopens: bool = True
    stagger_s: float = 0.2  # longer than a reset takes here: buyers before, during and after it
    sale: OnSale | None = None

    def for_sale(self, sale: OnSale) -> Fault:
        return dataclasses.replace(self, sale=sale)

    def targets(self, config: StackConfig) -> list[str]:
        return ["reset"]

    def inject(self, config: StackConfig) -> list[str]:
        terms = dict(self.terms)
        admin = FlashsaleClient(self.sale.base_url, admin_token=config.admin_token())
        asked = time.monotonic()
        # The sale's own strategy again: without one, a reset sells under the deployment's.
        admin.reset(self.sale.sku, self.sale.stock, strategy=self.sale.strategy, **terms)
        if self.sale.history is not None:
            self.sale.history.reset(self.sale.sku, self.sale.stock, window=terms["payment_window_s"],
                                    grace=config.payment_grace_s,
                                    opens_in=terms["starts_in"] - (time.monotonic() - asked))
        return self.targets(config)

    def heal(self, config: StackConfig, names: list[str]) -> None:
        """Nothing to bring back: the new sale is the sale."""


def _knobs(config: StackConfig, knobs: dict[str, str]) -> None:
    """Set the stand-in's delivery knobs (``payprovider``'s ``POST /_stand-in/knobs``)."""
    response = requests.post(f"http://127.0.0.1:{config.payprovider_port}/_stand-in/knobs", data=knobs,
                             headers={"Authorization": f"Bearer {config.payments_api_key()}"}, timeout=5)
    response.raise_for_status()


def until_batch_in_hand(metrics: str, patience: float) -> None:
    """Until the expirer serving ``metrics`` has a batch in hand.

    :raises RuntimeError: none within ``patience`` seconds.
    """
    deadline = time.monotonic() + patience
    while batch_in_hand(metrics) == 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the expirer took no batch in hand within {patience:g} s")
        time.sleep(0.01)


def batch_in_hand(metrics: str) -> float:
    """The orders in an expirer's batch in hand, from its /metrics at ``metrics`` (0:
    none, or it does not answer)."""
    try:
        text = requests.get(metrics, timeout=1).text
    except requests.RequestException:
        return 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "flashsale_expiry_batch_orders":
            return sum(sample.value for sample in family.samples)
    return 0.0


FAULTS: dict[str, Fault] = {
    fault.name: fault
    for fault in (
        Killed("kill-app", "an app instance (app1) SIGKILLed, started again after the sale",
               down_seconds=None, servers=("app1",)),
        Killed("restart-redis", "both Redis servers (the locks' and the gate's) killed and started again "
               "1 s later, from their append-only files (a crashed machine)", down_seconds=1.0,
               servers=REDIS_SERVERS),
        RedisLost("lose-redis", "both Redis servers killed and started again 1 s later without their "
                  "data (a lost machine, or no persistence)", down_seconds=1.0),
        Killed("restart-mariadb", "MariaDB killed and started again 2 s later (crash recovery)",
               down_seconds=2.0, servers=("mariadb",)),
        Paused("pause-app", "app1 frozen (SIGSTOP) for 12 s: past the 5 s lock leases and "
               "nginx's 10 s timeout, then thawed", down_seconds=12.0, server="app1"),
        Killed("kill-persister", "a persister (persist1) SIGKILLed, started again 2 s later: its pending "
               "entries are read again by it or claimed by the other", down_seconds=2.0,
               servers=("persist1",)),
        ResetUnderLoad("reset-under-load", "the operator resets the sale while buyers buy it, to as many "
                       "units on sale in an hour, behind a waiting room, each order with a 300 s payment "
                       "window: the new sale must hold and answer no order", down_seconds=None),
        ZooKeeperLeaderKilled("zk-leader", "the ZooKeeper leader killed, started again 2 s later "
                              "(ZK_NODES=3: the others elect a new one)", down_seconds=2.0),
    )
}


# Faults that strike only a sale with a payment window (the verdicts' window cells).
WINDOW_FAULTS: dict[str, Fault] = {
    fault.name: fault
    for fault in (
        ExpirerKilledMidBatch("kill-expirer", "the expirer SIGKILLed with a batch in hand (claimed, its "
                              "units not yet back everywhere), started again 2 s later", down_seconds=2.0),
        Killed("restart-redis-pending", "both Redis servers (the locks' and the gate's) killed with every "
               "order of the first wave pending, started again 1 s later from their append-only files: "
               "the gate rebuilds its sale, which must adopt the pending orders' returns and late payments",
               down_seconds=1.0, servers=REDIS_SERVERS),
        KilledAsOrdersFallDue("restart-mariadb-due", "MariaDB killed as the first orders fall due (late "
                              "payments and the expirer's first batch under way), started again 2 s later",
                              down_seconds=2.0, servers=("mariadb",)),
        KilledAsOrdersFallDue("kill-app-paying", "app1 SIGKILLed as the first orders fall due, in the "
                              "middle of late payments and webhooks, started again 2 s later",
                              down_seconds=2.0, servers=("app1",)),
        WebhookStorm("webhook-storm", "every webhook delivered two or three times, concurrently and out "
                     "of order, and half the payers paying twice at once (a second payment intent for "
                     "the same order)", down_seconds=None),
    )
}


def expected_loss(strategy: str, fault: str) -> bool:
    """A sale that loses what it promised, as its design says it may: the gate's
    accepted orders live only in Redis until a persister writes them, so a Redis that
    comes back without its data loses them (and the sale, until it is warmed again)."""
    return fault in FAULTS and FAULTS[fault].loses_redis and STRATEGIES[strategy].gated
