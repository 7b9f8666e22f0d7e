"""What bounds a sale under each design, measured on this machine, and what adding
nodes does to each bound: the capacity table beside the Kubernetes manifests
(deploy/k8s/README.md).

    python -m benchmarks.capacity [--seconds 6] [--connections 64] [--docs]
    (make bench-capacity: installs wrk, starts the stack, runs this)

Against the running stack, through nginx, with wrk (``benchmarks.gate``'s runner):

- **One hot product** under each design (``atomic``, ``mysql-for-update``, ``setnx``,
  ``redisson``, ``zookeeper``, the gate), each product reset to its strategy: the
  orders a second here, and the mean *hold* its accepted purchases report
  (``Server-Timing``): how long each kept what every buyer of that product takes in
  turn, the stock row (``atomic``, inside its one ``CALL``) or the lock (from getting
  it to releasing it). One product sells at most one order a hold, however many app
  replicas serve it: that is its ceiling. The share of the time it was held (orders/s
  × hold) says whether the hold bounded the run here; what is left is the lock's
  hand-over to the next waiter, or this machine's cores (their busy share is shown).
  The gate holds nothing across a round trip: one product's ceiling is its Redis
  shard's, a second of one core over Redis's CPU a sale script, measured on a Redis
  of its own (``benchmarks.gate_script``, the scripts sent together as the apps send
  them).
- **A sale spread over 50 products** (``atomic``, the gate): the CPU an answer by role,
  so the answers a second one app core serves, and the orders a second one core of
  the MariaDB primary writes (``atomic`` in the request, the gate through the
  persisters).
- **The gate's persisters alone**: every persister paused while a hot run piles up a
  backlog, then one resumed, then all: the orders a second one writes, and MariaDB's
  and the persisters' CPU a written order.
- **Adding nodes**: a second app instance (``atomic`` and the gate, hot and spread),
  measured on the same cores, one instance and two alternated round by round; a second
  persister, from the drains; what cannot be measured on one machine (a second Redis
  shard, a second stock segment) as an estimate, its arithmetic shown.

Every row is the median of ``--rounds`` rounds, the designs taken in turn within each
round. Then the table's conclusions, from the figures: what one Redis shard feeds, how
many persisters one MariaDB core takes.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import sys
import time
from dataclasses import dataclass, replace

import redis

from loadtest.client import FlashsaleClient
from loadtest.measured import recorded
from orders.gate.store import GROUP, gate_keys
from stack.config import StackConfig
from stack.control import apps_as_needed
from stack.supervisor import Supervisor

from . import capacity_plan, gate_script
from .capacity_plan import PerPurchase
from .cpu import ROLES, CpuMeter
from .gate import STOCK, Run, add_warm_up, closed, warm_up, wrk, wrk_buyers

HOT = ("atomic", "mysql-for-update", "setnx", "redisson", "zookeeper", "gate")
SPREAD = ("atomic", "gate")
PRODUCTS = 50  # a spread sale's products
SCALED = ("atomic", "gate")  # measured with one app instance against the stack's
TAKEN = {"atomic": "the stock row, inside one CALL",
         "mysql-for-update": "a lock row, FOR UPDATE to the commit"}


QUIET = 4  # buyers of the run that measures a hold with the cores to spare


@dataclass(frozen=True)
class Hot:
    """One hot product under a design: loaded (``--connections`` buyers) and quiet
    (``QUIET`` buyers: its hold with no queue for the cores inside it)."""

    loaded: Run
    quiet: Run

    @property
    def ceiling(self) -> float:
        """The orders a second one order a hold allows, the quiet hold's."""
        return 1000 / self.quiet.hold_ms if self.quiet.hold_ms else float("nan")


@dataclass(frozen=True)
class Drain:
    """The persisters writing a backlog of ``products``: how many wrote, the orders,
    the seconds, and the CPU a written order by role."""

    products: int
    persisters: int
    orders: int
    seconds: float
    cpu_us: dict[str, float]

    @property
    def rate(self) -> float:
        return self.orders / self.seconds


def orders_per_s(run: Run, seconds: float) -> float:
    return run.statuses.get(201, 0) / seconds


def busy(run: Run, cores: int) -> float:
    """The share of this machine's cores the run's processes kept busy."""
    return sum(run.cpu_us.values()) * run.requests_per_s / (cores * 1e6)


def _products(admin: FlashsaleClient, name: str, count: int, strategy: str) -> str:
    """``count`` products reset to ``strategy``; their prefix (``<prefix>0`` …)."""
    prefix = f"bench-capacity-{name}-{time.time_ns()}-"
    for i in range(count):
        admin.reset(f"{prefix}{i}", STOCK, strategy=strategy)
    return prefix


def _written(admin: FlashsaleClient, prefix: str, count: int) -> list[dict]:
    """Each product's audit once the persisters wrote its backlog (at most 120 s),
    then its gate sale closed (``gate.closed``)."""
    audits = [admin.audit(f"{prefix}{i}", settle=120) for i in range(count)]
    closed(admin, [f"{prefix}{i}" for i in range(count)])
    return audits


def hot(admin: FlashsaleClient, meter: CpuMeter, config: StackConfig, args,
        strategies: tuple[str, ...] = HOT) -> dict[str, Hot]:
    """One round of one hot product under each of ``strategies``, each a product of
    its own, warmed first (the instances may have just restarted)."""
    base = config.base_url + "/"
    runs = {}
    for strategy in strategies:
        sku = _products(admin, f"hot-{strategy}", 1, strategy) + "0"
        buyers = wrk_buyers(config)
        warm_up(args, base, sku=sku, seconds=args.seconds, connections=args.connections,
            meter=meter, tokens=buyers)
        loaded = wrk(strategy, base, sku=sku, seconds=args.seconds, connections=args.connections, meter=meter,
                     tokens=buyers)
        quiet = wrk(strategy, base, sku=sku, seconds=min(args.seconds, 3), connections=QUIET, meter=meter,
                    tokens=buyers)
        runs[strategy] = Hot(loaded, quiet)
        if strategy == "gate":
            _written(admin, sku.removesuffix("0"), 1)  # before the next row shares the cores
    return runs


def spread(admin: FlashsaleClient, meter: CpuMeter, config: StackConfig, args,
           strategies: tuple[str, ...] = SPREAD) -> dict[str, Run]:
    """One round of a sale spread over ``PRODUCTS`` products under each of ``strategies``."""
    base = config.base_url + "/"
    runs = {}
    for strategy in strategies:
        prefix = _products(admin, f"spread-{strategy}", PRODUCTS, strategy)
        warm_up(args, base, sku=f"{prefix}0", skus=PRODUCTS, seconds=args.seconds,
            connections=args.connections, meter=meter, tokens=wrk_buyers(config))
        runs[strategy] = wrk(strategy, base, sku=f"{prefix}0", skus=PRODUCTS, seconds=args.seconds,
                             connections=args.connections, meter=meter, tokens=wrk_buyers(config))
        if strategy == "gate":
            _written(admin, prefix, PRODUCTS)
    return runs


@dataclass(frozen=True)
class Measured:
    """Each row's median over the rounds: one hot product and a spread sale under the
    stack's instances, and ``SCALED``'s orders/s under one instance and under the
    stack's (hot and spread: ``(kind, strategy, instances)``)."""

    hot: dict[str, Hot]
    spread: dict[str, Run]
    scaled: dict[tuple[str, str, int], Run]


def measured(admin: FlashsaleClient, meter: CpuMeter, config: StackConfig, args, use) -> Measured:
    """``args.rounds`` rounds, each: every hot and spread row under the stack's
    instances, then ``SCALED``'s under one (``use``: ``apps_as_needed``'s), so that
    one instance and two meet the same drifts of a shared machine."""
    hots: dict[str, list[Hot]] = {s: [] for s in HOT}
    spreads: dict[str, list[Run]] = {s: [] for s in SPREAD}
    scaled: dict[tuple[str, str, int], list[Run]] = {}
    for _ in range(args.rounds):
        for instances in dict.fromkeys((config.instances, 1)):  # the stack's, then one
            use(section_delay_ms=0.0, instances=instances)
            everything = instances == config.instances
            hot_round = hot(admin, meter, config, args, HOT if everything else SCALED)
            spread_round = spread(admin, meter, config, args, SPREAD if everything else SCALED)
            for strategy in SCALED:
                scaled.setdefault(("hot", strategy, instances), []).append(hot_round[strategy].loaded)
                scaled.setdefault(("spread", strategy, instances), []).append(spread_round[strategy])
            if everything:
                for strategy, runs in hot_round.items():
                    hots[strategy].append(runs)
                for strategy, run in spread_round.items():
                    spreads[strategy].append(run)
    def orders(run: Run) -> float:
        return orders_per_s(run, args.seconds)

    return Measured(
        hot={s: Hot(median((r.loaded for r in runs), key=orders),
                    median((r.quiet for r in runs), key=lambda q: q.hold_ms or 0))
             for s, runs in hots.items()},
        spread={s: median(runs, key=orders) for s, runs in spreads.items()},
        scaled={k: median(runs, key=orders) for k, runs in scaled.items()})


def median(rounds, key):
    """A row's figures from its rounds (runs, or drains): the round of median ``key``,
    with each role's median CPU (``cpu_us``)."""
    rounds = sorted(rounds, key=key)
    middle = rounds[len(rounds) // 2]
    return replace(middle, cpu_us={role: statistics.median(r.cpu_us[role] for r in rounds)
                                   for role in middle.cpu_us})


def _unwritten(gate: redis.Redis, streams: list[str]) -> bool:
    """Whether any of the sales' streams holds an order no persister has written: one
    its group was not delivered, or one delivered and not acknowledged (a persister
    acknowledges after its commit)."""
    pipe = gate.pipeline(transaction=False)
    for stream in streams:
        pipe.xinfo_stream(stream)
        pipe.xinfo_groups(stream)
    replies = pipe.execute()
    for info, groups in zip(replies[::2], replies[1::2], strict=True):
        group = next((g for g in groups if g["name"] == GROUP), None)
        if group is None or group["pending"] or group["last-delivered-id"] != info["last-generated-id"]:
            return True
    return False


def _settled(meter: CpuMeter, role: str = "mariadb", *, below: float = 0.05, timeout: float = 30) -> None:
    """Until ``role`` uses less than ``below`` of a core over half a second: MariaDB
    purges and flushes what earlier rows wrote, and that CPU is no drain's."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = meter.snapshot()[role]
        time.sleep(0.5)
        if (meter.snapshot()[role] - before) / 0.5 < below:
            return


def drains(admin: FlashsaleClient, meter: CpuMeter, config: StackConfig, sup: Supervisor,
           args) -> list[Drain]:
    """For one product and for many: one persister, then all, each writing a backlog
    piled up while all were paused (the products opened while paused, so that no
    paused persister is handed any of it); timed from the gate's Redis, polled every
    5 ms, once MariaDB has settled; each sale audited after. The median of
    ``args.rounds`` drains each, one persister and all alternated."""
    base = config.base_url + "/"
    gate = redis.Redis(port=config.redis_gate_port, decode_responses=True)
    names = list(config.persister_names)
    done = []
    for products in (1, PRODUCTS):
        rounds: dict[int, list[Drain]] = {1: [], len(names): []}
        for _ in range(args.rounds):
            for writing in ([names[0]], names):
                with sup.paused([n for n in names if n not in writing]):
                    with sup.paused(writing):
                        prefix = _products(admin, f"drain-{products}-{len(writing)}", products, "gate")
                        streams = [gate_keys(f"{prefix}{i}").stream for i in range(products)]
                        wrk("backlog", base, sku=f"{prefix}0", skus=products, seconds=args.seconds,
                            connections=args.connections, meter=meter, tokens=wrk_buyers(config))
                        backlog = sum(gate.xlen(stream) for stream in streams)  # none read yet
                        _settled(meter)
                        before = meter.snapshot()
                    started = time.monotonic()  # ``writing`` resumed, the others still paused
                    while _unwritten(gate, streams):
                        assert time.monotonic() - started < 120, "the persisters did not write the backlog"
                        time.sleep(0.005)
                    took = time.monotonic() - started
                    used = meter.snapshot() - before
                audits = _written(admin, prefix, products)
                assert all(a["consistent"] for a in audits), audits
                rounds[len(writing)].append(Drain(products, len(writing), backlog, took,
                                                  {role: used[role] * 1e6 / backlog for role in ROLES}))
        done += [median(drained, key=lambda d: d.rate) for drained in rounds.values()]
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--connections", type=int, default=64)
    add_warm_up(parser)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every row (each row their median)")
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/capacity.md, for the docs")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        parser.error("wrk is not installed (make bench-capacity installs it)")
    command = "python -m benchmarks.capacity " + shlex.join(sys.argv[1:] if argv is None else argv)
    config = StackConfig.from_env()
    admin = FlashsaleClient.for_stack(config)
    sup = Supervisor(config)
    meter = CpuMeter(sup)
    with apps_as_needed(config) as use:
        runs = measured(admin, meter, config, args, use)  # the purchase's own hold: no sleep inside it
        use(section_delay_ms=0.0)  # the stack's instances again, to pile the backlogs up
        drained = drains(admin, meter, config, sup, args)
    shard = gate_script.alternating_runs(argparse.Namespace(  # under the fsync policy the stack's gate runs
        seconds=min(args.seconds, 4), rounds=1, processes=2, threads=16,
        appendfsync=config.redis_gate_appendfsync))["together"][0]
    with recorded("capacity", command, write=args.docs):
        _report(command, args, config, runs, drained, shard)
    return 0


def _report(command: str, args, config: StackConfig, runs: Measured, drained: list[Drain],
            shard: dict[str, float]) -> None:
    cores = os.cpu_count() or 1
    shard_ceiling = 1e6 / shard["cpu_us"]
    hot_runs, spread_runs, scaled = runs.hot, runs.spread, runs.scaled
    print(f"`{command}` ({cores} cores shared by every process and the load client; every server on "
          f"loopback): wrk -t2 -c{args.connections}, {args.seconds:g} s a row; {config.instances} app "
          f"instances under {config.server} ({config.workers} × {config.threads}), {config.persisters} "
          f"persisters; each row the median of {args.rounds} rounds, the designs in turn within a round\n")
    print(f"**One hot product.** Orders/s with {args.connections} buyers; the hold its purchases "
          f"report with {QUIET} buyers (the cores to spare) and the ceiling that sets, one order a hold, "
          f"whatever the app replicas; the hold with {args.connections} buyers, the share of the run it "
          "took (orders/s × hold: near 100 %, the hold bounded the run), and the share of this "
          "machine's cores busy:\n")
    print(f"| design | orders/s here | what every buyer takes in turn | hold, ms, {QUIET} buyers "
          f"| ceiling, orders/s | hold, ms, {args.connections} buyers | held | cores busy |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for strategy, runs in hot_runs.items():
        rate = orders_per_s(runs.loaded, args.seconds)
        quiet, loaded = runs.quiet.hold_ms or float("nan"), runs.loaded.hold_ms or float("nan")
        if strategy == "gate":
            print(f"| gate | {rate:,.0f} | one Redis shard's thread: {shard['cpu_us']:.1f} µs of CPU "
                  f"a script (`benchmarks.gate_script`) | {quiet:.2f} (the script's round trip) "
                  f"| **{shard_ceiling:,.0f}** | {loaded:.2f} | {rate / shard_ceiling:.0%} of the shard "
                  f"| {busy(runs.loaded, cores):.0%} |")
            continue
        print(f"| {strategy} | {rate:,.0f} | {TAKEN.get(strategy, f'the {strategy} lock')} | {quiet:.2f} "
              f"| **{runs.ceiling:,.0f}** | {loaded:.2f} | {rate * loaded / 1000:.0%} "
              f"| {busy(runs.loaded, cores):.0%} |")
    print(f"\n**A sale spread over {PRODUCTS} products.** CPU µs an answer by role, and what one core "
          "of each serves:\n")
    print("| design | orders/s here | apps | MariaDB | Redis | persisters | one app core, answers/s "
          "| one MariaDB core, orders/s |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    for strategy, run in spread_runs.items():
        cpu = run.cpu_us
        print(f"| {strategy} | {orders_per_s(run, args.seconds):,.0f} | {cpu['apps']:,.0f} "
              f"| {cpu['mariadb']:,.0f} | {cpu['redis']:,.0f} | {cpu['persisters']:,.0f} "
              f"| **{1e6 / cpu['apps']:,.0f}** | **{1e6 / cpu['mariadb']:,.0f}** |")
    print("\n**The gate's persisters alone**, writing a backlog piled up while they were paused:\n")
    print("| products | persisters writing | orders | seconds | orders/s | persisters' CPU µs an order "
          "| MariaDB's CPU µs an order |\n|---:|---:|---:|---:|---:|---:|---:|")
    for drain in drained:
        print(f"| {drain.products} | {drain.persisters} | {drain.orders:,} | {drain.seconds:.2f} "
              f"| **{drain.rate:,.0f}** | {drain.cpu_us['persisters']:,.0f} "
              f"| {drain.cpu_us['mariadb']:,.0f} |")
    print("\n" + conclusions(shard_ceiling, spread_runs["gate"], drained))
    print(f"\n**Adding nodes.** Measured: a second app instance on the same {cores} cores (one instance "
          f"and {config.instances} alternated in each round), a second persister (the drains above). "
          "Estimated, with the arithmetic: what one machine cannot show.\n")
    print("| added | design, sale | before, orders/s | after, orders/s | after / before | how known |\n"
          "|---|---|---:|---:|---:|---|")
    rows = adding_nodes(config.instances, args.seconds, scaled, drained, shard_ceiling,
                        hot_runs["atomic"])
    for row in rows:
        print("| " + " | ".join(row) + " |")
    costs = {strategy: PerPurchase(**{role: run.cpu_us[role] for role in ("apps", "mariadb", "redis",
                                                                          "persisters")})
             for strategy, run in spread_runs.items()}
    print("\n" + capacity_plan.table(costs, shard_ceiling))


def adding_nodes(instances: int, seconds: float, scaled: dict[tuple[str, str, int], Run],
                 drained: list[Drain], shard_ceiling: float, atomic: Hot) -> list[list[str]]:
    """The adding-nodes rows: measured ones from the runs, estimates with their sums."""
    sale = {"hot": "one hot product", "spread": f"{PRODUCTS} products"}
    rows = []
    for kind in ("hot", "spread"):
        for strategy in SCALED:
            before, after = (scaled[(kind, strategy, n)] for n in (1, instances))
            one, more = orders_per_s(before, seconds), orders_per_s(after, seconds)
            rows.append([f"app instances, 1 → {instances}", f"{strategy}, {sale[kind]}", f"{one:,.0f}",
                         f"{more:,.0f}", f"{more / one:.2f}", "measured"])
    by = {(d.products, d.persisters): d.rate for d in drained}
    most = max(p for _, p in by)
    for products in (1, PRODUCTS):
        one, more = by[(products, 1)], by[(products, most)]
        written = "one product" if products == 1 else sale["spread"]
        rows.append([f"persisters, 1 → {most}", f"gate, writing {written}", f"{one:,.0f}", f"{more:,.0f}",
                     f"{more / one:.2f}", "measured (the drains)"])
    rows.append(["Redis shards, 1 → 2", "gate, one hot product", f"{shard_ceiling:,.0f}",
                 f"{shard_ceiling:,.0f}", "1.00", "estimate: one product's keys share a hash tag, so one "
                 "shard sells it"])
    rows.append(["Redis shards, 1 → 2", f"gate, {sale['spread']}", f"{shard_ceiling:,.0f}",
                 f"{2 * shard_ceiling:,.0f}", "2.00", f"estimate: the products split over the shards by hash "
                 f"tag, each shard its own ceiling: 2 × {shard_ceiling:,.0f}"])
    ceiling = atomic.ceiling
    rows.append(["stock segments, 1 → 2", "atomic, one hot product", f"{ceiling:,.0f}", f"{2 * ceiling:,.0f}",
                 "2.00", f"estimate: a segment is a row of its own, each held in turn: 2 × {ceiling:,.0f} "
                 "(the ceiling above), where the cores allow"])
    return rows


def conclusions(shard_ceiling: float, gate_spread: Run, drained: list[Drain]) -> str:
    """What the figures say of adding nodes: the app cores one Redis shard feeds, and
    the persister cores one MariaDB core takes."""
    gate_core = 1e6 / gate_spread.cpu_us["apps"]
    one_hot = {d.persisters: d for d in drained if d.products == 1}
    spread_one = next(d for d in drained if d.products > 1 and d.persisters == 1)
    most = max(one_hot)
    writer, database = spread_one.cpu_us["persisters"], spread_one.cpu_us["mariadb"]
    return (f"From these figures: one Redis shard sells one hot product at up to {shard_ceiling:,.0f} "
            f"orders/s, what {shard_ceiling / gate_core:.0f} app cores answer ({gate_core:,.0f} gate "
            "purchases/s each). One product's batches are written one at a time (each locks the sale's "
            "row until its commit), so more persisters overlap only outside their transactions: "
            f"{one_hot[1].rate:,.0f} orders/s with one, {one_hot[most].rate:,.0f} with {most}. Over many "
            f"products they write side by side, each order costing a persister "
            f"{writer:,.0f} µs of CPU and MariaDB {database:,.0f} µs: one MariaDB core takes about "
            f"{writer / database:.1f} persister cores.")


if __name__ == "__main__":
    sys.exit(main())
