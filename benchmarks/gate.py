"""What the gate sells on one hot SKU, what it costs to refuse, how fast its
persisters drain, and what the AOF's fsync policy costs, all as ratios to
``/api/ping`` measured in one run, with wrk (a C client: not the bottleneck).

    python -m benchmarks.gate [--seconds 8] [--connections 64] [--pairs 0]
    (make bench-gate: installs wrk, starts the stack, runs this)

Rows, each a wrk run of ``--seconds`` against nginx, after 2 s of the same to warm
the instances up (first requests import and connect):

- ``ping``: the ceiling, ``GET /api/ping``.
- ``gate, appendfsync everysec`` / ``always``: every request buys one hot product
  (``POST /api/orders``, a key of its own each), the persisters running; Redis's
  fsync policy set for the row (``CONFIG SET``). Beside each: from accepted to
  confirmed, p50/p99, as the sale's audit reports it; and "written": the orders
  over the time until the last of them was in MySQL (the row's seconds, plus the
  persisters' catching up after it), as a ratio to ping. The persisters share the
  cores with the sale and fall behind it; their work left after the row is not in
  the row's rate, and "written" is the rate with it.
- ``gate, no replica waited`` / ``gate, 1 replica waited``: the accepted row
  (everysec) with a replica of the gate's Redis on loopback (started here, stopped
  after), the purchases answered without waiting for it, then only once it holds
  their writes (``FLASHSALE_GATE_REPLICAS=1``: ``WAIT`` after each batch of scripts),
  alternating, ``--replica-rounds`` times each.
- ``gate, sold out``: the product has no stock: every answer is 409, from each
  process's memory of the sold-out sale once the script has said so (``orders.gate.lifecycle``).
- ``refused before Redis``: the same purchases with quantity 0, each refused 400 by
  the service before the script: the gate's request less its round trip.
- ``atomic``: the best strategy that writes MySQL inside the request, for reference.

Then the persisters alone: both are paused (SIGSTOP) for a hot gate run, so the
backlog piles up, then resumed; drain rate = backlog / time to write it.

With ``--pairs N``, N more pairs of rows, ping then the accepted row (everysec), each
pair back to back, and the persisters done with one pair's orders before the next
pair's ping: on a shared machine the ceiling itself moves by a tenth from one
minute to the next, and a ratio of two adjacent rows, N times, says how much of a
difference is the change and how much the machine.

Last, where each row's CPU went: per answer, summed by role over the stack's
processes and the load client (``benchmarks.cpu``), since they all share the cores.

The stack is put back as it was (strategy, fsync policy, persisters running).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import redis

from loadtest.buyers import buyers_file
from loadtest.client import FlashsaleClient
from loadtest.measured import recorded
from stack.config import StackConfig
from stack.control import apps_as_needed
from stack.scratch import replica_in_step, start_redis
from stack.supervisor import Supervisor

from .cpu import ROLES, CpuMeter, children_cpu

WRK_SCRIPT = Path(__file__).with_name("wrk-purchase.lua")
WRK_BUYERS = 1000  # wrk's purchases go to them in turn
STOCK = 1_000_000  # more than any run sells: every request buys


@dataclass(frozen=True)
class Written:
    """A gate row's orders, and how long after its start the last was in MySQL."""

    orders: int
    seconds: float

    def ratio(self, ping: Run) -> str:
        return f"{self.orders / self.seconds / ping.requests_per_s:.2f}"


def written(admin: FlashsaleClient, sku: str, run_seconds: float) -> tuple[dict, Written]:
    """The sale's gate audit once its backlog is 0 (after at most 60 s), and its
    orders over the row's seconds plus the wait; then the sale is closed."""
    started = time.monotonic()
    gate = admin.audit(sku, settle=60)["gate"]
    wrote = Written(gate["persisted"], run_seconds + time.monotonic() - started)
    closed(admin, [sku])
    return gate, wrote


def closed(admin: FlashsaleClient, skus: list[str]) -> None:
    """Close the gate sales of ``skus`` (reset them sold out): every open sale costs
    each persister's every read, and the rows after a benchmark's must not pay for
    it. Several at once, since a gate sale's reset waits out the sold-out memory."""
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda sku: admin.reset(sku, 0, strategy="gate"), skus))


@dataclass(frozen=True)
class Run:
    label: str
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    statuses: dict[int, int]  # counted by the wrk script (purchases only)
    cpu_us: dict[str, float]  # CPU per answer, by role (benchmarks.cpu), and "wrk": the client's
    hold_ms: float | None = None  # the accepted purchases' mean Server-Timing hold (purchases only)


_buyers: dict[Path, Path] = {}


def wrk_buyers(config: StackConfig) -> Path | None:
    """The buyers wrk's purchases come from when the instances take the buyer from
    credentials (a ``buyers_make`` file in the stack's run directory, made once a
    process); None when they read it from the body."""
    if not config.buyer_auth:
        return None
    if config.run_dir not in _buyers:
        out = config.run_dir / "bench-buyers.tsv"
        _buyers[config.run_dir] = buyers_file(config, out, prefix="bench-buyer-", count=WRK_BUYERS, hours=12)
    return _buyers[config.run_dir]


def _ms(value: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", value).groups()
    return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


# A warm-up before a measured run (the instances may have just restarted): as long as
# the run, at most this, unless --warm-up says otherwise.
WARM_UP_S = 2.0


def _warm_up(value: str) -> float:
    seconds = float(value)
    if not seconds >= 0:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}")
    return seconds


def add_warm_up(parser: argparse.ArgumentParser) -> None:
    """``--warm-up``: the suite's runs check a command, not its figures, and skip it."""
    parser.add_argument("--warm-up", type=_warm_up, metavar="SECONDS",
                        help=f"the unmeasured wrk run before each row; 0: none (default: as long as a row, "
                             f"at most {WARM_UP_S:g} s)")


def warm_up_s(args: argparse.Namespace) -> float:
    """How long the warm-up before each of the run's rows lasts."""
    return min(WARM_UP_S, args.seconds) if args.warm_up is None else args.warm_up


def warm_up(args: argparse.Namespace, url: str, **measured) -> None:
    """The measured run (``wrk``'s arguments) before it, ``warm_up_s`` long, its figures
    dropped: the first requests after a restart import and connect. None for 0 s."""
    if (seconds := warm_up_s(args)) > 0:
        wrk("warm-up", url, **{**measured, "seconds": seconds})


# A row's figures are per answer and its latencies percentiles: a run that got fewer
# answers than this (a starved stack, a short --seconds) measured nothing, and runs
# again for twice as long, until LONGEST_S.
FEWEST_ANSWERS = 20
LONGEST_S = 64.0


def wrk(label: str, url: str, *, seconds: float, connections: int, meter: CpuMeter, sku: str | None = None,
        quantity: int = 1, skus: int = 1, tokens: Path | None = None) -> Run:
    """A wrk run: GET ``url``, or with ``sku`` purchases of it (``<prefix>0``), or
    spread over ``skus`` products ``<prefix>0`` .. ``<prefix><skus - 1>``; with
    ``tokens`` (a ``buyers_make`` file), each purchase by one of its buyers, in turn.
    Run again, longer, while it gets fewer than ``FEWEST_ANSWERS``."""
    command = ["wrk", "-t2", f"-c{connections}", "--latency"]
    env = dict(os.environ)
    if sku is not None:
        command += ["-s", str(WRK_SCRIPT)]
        env.update(SKUS=str(skus), PREFIX=sku.removesuffix("0"), QUANTITY=str(quantity))
        if tokens is not None:
            env["TOKENS"] = str(tokens)
    while True:
        stack_before, client_before = meter.snapshot(), children_cpu()
        out = subprocess.run([*command, f"-d{seconds:g}s", url], capture_output=True, text=True, env=env,
                             check=True).stdout
        stack = meter.snapshot() - stack_before
        answers = int(re.search(r"(\d+) requests in", out).group(1))
        if answers >= FEWEST_ANSWERS:
            break
        if seconds * 2 > LONGEST_S:
            raise SystemExit(f"{label}: wrk got {answers} answers in {seconds:g} s, fewer than "
                             f"{FEWEST_ANSWERS}: the stack is not answering ({url})")
        print(f"[bench] {label}: {answers} answers in {seconds:g} s, fewer than {FEWEST_ANSWERS}: "
              f"again for {seconds * 2:g} s", file=sys.stderr)
        seconds *= 2
    cpu = {role: stack[role] * 1e6 / answers for role in ROLES}
    cpu["wrk"] = (children_cpu() - client_before) * 1e6 / answers
    statuses: dict[int, int] = {}
    for n, status in re.findall(r"thread \d+: (\d+) x (\d+)", out):
        statuses[int(status)] = statuses.get(int(status), 0) + int(n)
    held = re.findall(r"thread \d+: held ([\d.]+) ms over (\d+)", out)
    holds = sum(int(n) for _, n in held)
    return Run(label=label, requests_per_s=float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
               p50_ms=_ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1)),
               p99_ms=_ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1)), statuses=statuses, cpu_us=cpu,
               hold_ms=sum(float(ms) for ms, _ in held) / holds if holds else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--connections", type=int, default=64)
    add_warm_up(parser)
    parser.add_argument("--pairs", type=int, default=0, help="more (ping, accepted) pairs of rows")
    parser.add_argument("--replica-rounds", type=int, default=2,
                        help="rounds of the rows without and with a replica waited for (alternating)")
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/gate.md, for the docs")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        parser.error("wrk is not installed (make bench-gate installs it)")
    command = "python -m benchmarks.gate " + shlex.join(sys.argv[1:] if argv is None else argv)
    config = StackConfig.from_env()
    admin = FlashsaleClient.for_stack(config)
    r = redis.Redis(port=config.redis_gate_port)  # the gate's AOF policy is the one measured
    fsync_before = r.config_get("appendfsync")["appendfsync"]
    sup = Supervisor(config)
    base = config.base_url + "/"
    meter = CpuMeter(sup)
    timing = dict(seconds=args.seconds, connections=args.connections, meter=meter, tokens=wrk_buyers(config))
    rows: list[tuple[Run, str, Written | None]] = []
    pairs: list[tuple[Run, Run, Written]] = []
    drain = ""
    try:
        with apps_as_needed(config) as use:
            # Runs the first requests (imports, connections); discarded.
            warm_up(args, config.base_url + "/api/ping", **timing)
            rows.append((wrk("ping", config.base_url + "/api/ping", **timing), "", None))
            use(strategy="gate", section_delay_ms=0.0)
            admin.reset("bench-gate-warm-0", STOCK)
            warm_up(args, base, sku="bench-gate-warm-0", **timing)
            for fsync in ("everysec", "always"):
                r.config_set("appendfsync", fsync)
                sku = f"bench-gate-{fsync}-0"
                admin.reset(sku, STOCK)
                run = wrk(f"gate, appendfsync {fsync}", base, sku=sku, **timing)
                gate, wrote = written(admin, sku, args.seconds)
                rows.append((run, _confirmed(gate), wrote))
            r.config_set("appendfsync", "everysec")  # the accepted row's policy (put back below)
            replicated = replica_rounds(use, admin, config, base, args.replica_rounds, timing)
            rows.extend(replicated)
            r.config_set("appendfsync", fsync_before)
            admin.reset("bench-gate-soldout-0", 0)
            rows.append((wrk("gate, sold out (409)", base, sku="bench-gate-soldout-0", **timing), "", None))
            # The same purchase refused before its round trip (quantity 0: 400), what
            # the gate's request costs without Redis.
            rows.append((wrk("refused before Redis (400)", base, sku="bench-gate-soldout-0", quantity=0,
                             **timing), "", None))

            # The persisters alone: paused while a hot run piles up a backlog.
            sku = "bench-gate-drain-0"
            admin.reset(sku, STOCK)
            with sup.paused(config.persister_names):
                wrk("backlog", base, sku=sku, **timing)
                backlog = admin.audit(sku, settle=0)["gate"]["backlog"]
            started = time.monotonic()
            audit = admin.audit(sku, settle=120)
            took = time.monotonic() - started
            batch = os.environ.get("FLASHSALE_GATE_BATCH", "200")
            drain = (f"{backlog:,} orders written by {config.persisters} persisters in {took:.2f} s: "
                     f"**{backlog / took:,.0f} orders/s** (batches of up to {batch}; "
                     f"audit consistent: {audit['consistent']})")

            if args.pairs:
                r.config_set("appendfsync", "everysec")  # the accepted row's policy (put back below)
            for n in range(args.pairs):
                pinged = wrk("ping", config.base_url + "/api/ping", **timing)
                sku = f"bench-gate-pair-{n}-0"
                admin.reset(sku, STOCK)
                sold = wrk("gate, appendfsync everysec", base, sku=sku, **timing)
                # Written before the next ping, which would otherwise share the cores with it.
                pairs.append((pinged, sold, written(admin, sku, args.seconds)[1]))

            use(strategy="atomic", section_delay_ms=0.0)
            admin.reset("bench-gate-atomic-0", STOCK)
            warm_up(args, base, sku="bench-gate-atomic-0", **timing)
            rows.append((wrk("atomic (for reference)", base, sku="bench-gate-atomic-0", **timing), "", None))
    finally:
        r.config_set("appendfsync", fsync_before)

    with recorded("gate", command, write=args.docs):
        _report(command, args, config, rows, drain, pairs)
    return 0


WITHOUT, WITH = "gate, no replica waited", "gate, 1 replica waited"


def _confirmed(gate: dict) -> str:
    """From accepted to confirmed, p50 / p99 ms, as the audit reports it."""
    if gate["confirm_p50_ms"] is None:
        return f"none confirmed ({gate['persisted']:,} orders)"
    return f"{gate['confirm_p50_ms']:.0f} / {gate['confirm_p99_ms']:.0f} ({gate['persisted']:,} orders)"


def replica_rounds(use, admin: FlashsaleClient, config: StackConfig, base: str, rounds: int,
                   timing: dict) -> list[tuple[Run, str, Written | None]]:
    """The accepted row without and with the replica waited for, alternating which goes
    first, on a replica of the gate's Redis started for them (the instances restart
    between the two settings; the replica stays up for both)."""
    rows = []
    replica = start_redis("--replicaof", "127.0.0.1", str(config.redis_gate_port))
    try:
        primary = redis.Redis(port=config.redis_gate_port)
        deadline = time.monotonic() + 30
        while not replica_in_step(primary):
            if time.monotonic() > deadline:
                raise SystemExit("the gate's replica did not sync within 30 s")
            time.sleep(0.1)
        for n in range(rounds):
            for waited in ((0, 1) if n % 2 == 0 else (1, 0)):
                use(strategy="gate", section_delay_ms=0.0, gate_replicas=waited)
                sku = f"bench-gate-replicas-{n}-{waited}-0"  # wrk buys <prefix>0
                admin.reset(sku, STOCK)
                run = wrk(WITH if waited else WITHOUT, base, sku=sku, **timing)
                gate, wrote = written(admin, sku, timing["seconds"])
                rows.append((run, _confirmed(gate), wrote))
    finally:
        use(strategy="gate", section_delay_ms=0.0, gate_replicas=0)
        replica.stop()
    return rows


def _report(command: str, args, config: StackConfig, rows: list, drain: str, pairs: list) -> None:
    """The benchmark's tables, as printed (and, with --docs, written for the docs)."""
    ping = rows[0][0]
    print(f"`{command}`: wrk -t2 -c{args.connections}, {args.seconds:g} s per row, against nginx on "
          f"127.0.0.1 ({config.instances} instances x {config.workers} workers x {config.threads} "
          f"threads, {config.persisters} persisters, {os.cpu_count()} cores shared by all)\n")
    print("| row | answers/s | × ping | p50 ms | p99 ms | p99 ÷ ping's | answers | accepted → confirmed "
          "p50 / p99 ms | written × ping |")
    print("|---|---:|---:|---:|---:|---:|---|---|---:|")
    for run, confirm, wrote in rows:
        answers = ", ".join(f"{s}: {n:,}" for s, n in sorted(run.statuses.items())) or "200"
        print(f"| {run.label} | {run.requests_per_s:,.0f} | {run.requests_per_s / ping.requests_per_s:.2f} "
              f"| {run.p50_ms:.1f} | {run.p99_ms:.1f} | {run.p99_ms / ping.p99_ms:.1f} | {answers} "
              f"| {confirm} | {wrote.ratio(ping) if wrote else ''} |")
    without = [run.requests_per_s for run, _, _ in rows if run.label == WITHOUT]
    waited = [run.requests_per_s for run, _, _ in rows if run.label == WITH]
    if without and waited:
        ratios = [w / o for o, w in zip(without, waited, strict=True)]
        print(f"\nA replica waited for (`FLASHSALE_GATE_REPLICAS=1`) against none, round by round: "
              f"{', '.join(f'{x:.2f}' for x in ratios)} (median **{statistics.median(ratios):.2f}×** "
              f"the answers a second)")
    print(f"\nPersisters alone: {drain}")
    if pairs:
        ratios = [gate.requests_per_s / pinged.requests_per_s for pinged, gate, _ in pairs]
        print(f"\nPing, then the accepted row (everysec), {len(pairs)} more times back to back:\n")
        print("| pair | ping answers/s | accepted answers/s | × ping | written × ping | accepted CPU µs "
              "| ping CPU µs |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for n, ((pinged, gate, wrote), ratio) in enumerate(zip(pairs, ratios, strict=True), 1):
            print(f"| {n} | {pinged.requests_per_s:,.0f} | {gate.requests_per_s:,.0f} | {ratio:.2f} "
                  f"| {wrote.ratio(pinged)} | {sum(gate.cpu_us.values()):,.0f} "
                  f"| {sum(pinged.cpu_us.values()):,.0f} |")
        print(f"\nAccepted × ping over the {len(pairs)} pairs: median {statistics.median(ratios):.2f}, "
              f"{min(ratios):.2f} to {max(ratios):.2f}")
    print("\nCPU per answer, µs, over each row's run, summed by role (user + system, from psutil; "
          "`wrk`: the load client, on the same cores):\n")
    print("| row | all | " + " | ".join([*ROLES, "wrk"]) + " |")
    print("|---|" + "---:|" * (len(ROLES) + 2))
    for run, _, _ in rows:
        print(f"| {run.label} | {sum(run.cpu_us.values()):,.0f} | "
              + " | ".join(f"{run.cpu_us[role]:,.0f}" for role in [*ROLES, "wrk"]) + " |")


if __name__ == "__main__":
    sys.exit(main())
