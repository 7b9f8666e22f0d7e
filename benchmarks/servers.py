"""The request server: gunicorn against granian (``FLASHSALE_SERVER``), row by row, in
alternating rounds of one run, with wrk (a C client: not the bottleneck).

    python -m benchmarks.servers [--rounds 3] [--seconds 6] [--search] [--docs]
                                 [--rows gate ...] [--shape [SERVER=]WORKERSxTHREADS ...]
    (make bench-servers: installs wrk, starts the stack, runs this)

Rows, each a wrk run after 2 s of the same (the first requests import and connect):

- ``ping``: ``GET /api/ping`` through nginx, no backend: the floor of every request;
- ``product, app1``: ``GET /api/products/<sku>`` straight to app1, past nginx (whose
  half-second cache would answer it), the apps' own cached read;
- ``gate, hot``: every request buys one hot product (a key of its own each), through
  nginx, the persisters running;
- ``gate, hot, scripts alone``: the same with ``FLASHSALE_GATE_PIPELINE=false``, each
  purchase's script in a round trip of its own;
- ``atomic, spread``: purchases over 50 products, so nobody waits;
- ``redisson, hot, 8 segments``: one product in 8 segments under the Redisson lock.

A round runs every row under each server, the apps restarted between and the order
of the servers flipped each round, so neither always runs first on a machine whose
ceiling moves by a tenth from one minute to the next. Reported: the medians of each
row's answers/s, its p99, and its CPU per answer by role (``benchmarks.cpu``): the
app instances (the server and Django in them), the persisters, Redis, MariaDB, nginx
and wrk, all on the same cores. The apps' share is then split: Django's own, the same
request's CPU in-process with no server around it (``benchmarks.purchase_cpu``, one
request at a time), and the rest, what serving it under load adds (the server, and
the thread switches and GIL hand-offs of a loaded process).

With ``--search``, first each server under a few shapes (workers × threads, granian's
threads being its blocking threads) on ping and the gate, one run each; the rounds
then run each server in its best shape for the gate (the sale's row). ``--shape`` sets
them instead: ``--shape gunicorn=2x16 granian=1x32``, to compare the search's picks
over more rounds than one run a shape.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import sys

from flashsale.serve import SERVERS
from loadtest.client import FlashsaleClient
from loadtest.measured import recorded
from stack.config import StackConfig
from stack.control import apps_as_needed
from stack.supervisor import Supervisor

from .cpu import ROLES, CpuMeter
from .cpu import in_process as app_cpu
from .gate import STOCK, Run, add_warm_up, warm_up, written, wrk, wrk_buyers

SPREAD = 50
ALONE = "gate, hot, scripts alone"  # FLASHSALE_GATE_PIPELINE=false: a round trip a purchase
ROWS = ("ping", "product, app1", "gate, hot", ALONE, "atomic, spread", "redisson, hot, 8 segments")
SHAPES = ((1, 8), (1, 32), (2, 8), (2, 16), (2, 32), (3, 8))  # (workers, threads) for --search
# Each row's request in benchmarks.purchase_cpu.
IN_PROCESS = {"ping": "ping", "product, app1": "product", "gate, hot": "gate", ALONE: "gate",
              "atomic, spread": "atomic, spread", "redisson, hot, 8 segments": "redisson, hot, 8 segments"}


def rows(config: StackConfig, admin: FlashsaleClient, meter: CpuMeter, args, tag: str,
         only: tuple[str, ...] = ROWS) -> dict[str, Run]:
    """Each row of ``only`` once, against the apps as they run now; ``tag`` keeps
    each run's products apart."""
    timing = dict(seconds=args.seconds, connections=args.connections, meter=meter, tokens=wrk_buyers(config))
    base = config.base_url + "/"
    runs: dict[str, Run] = {}
    if "ping" in only:
        warm_up(args, config.base_url + "/api/ping", **timing)
        runs["ping"] = wrk("ping", config.base_url + "/api/ping", **timing)
    if "product, app1" in only:
        sku = f"bench-servers-read-{tag}"
        admin.reset(sku, STOCK, strategy="atomic")
        url = f"http://127.0.0.1:{config.app_port_of(config.app_names[0])}/api/products/{sku}"
        warm_up(args, url, **timing)
        runs["product, app1"] = wrk("product, app1", url, **timing)
    for row in ("gate, hot", ALONE):  # the same; the apps run with the scripts sent alone for ALONE
        if row in only:
            sku = f"bench-servers-gate-{tag}-{'alone-' if row == ALONE else ''}0"
            admin.reset(sku, STOCK, strategy="gate")
            warm_up(args, base, sku=sku, **timing)
            runs[row] = wrk(row, base, sku=sku, **timing)
            written(admin, sku, args.seconds)  # the persisters done before the next row shares the cores
    if "atomic, spread" in only:
        prefix = f"bench-servers-atomic-{tag}-"
        for i in range(SPREAD):
            admin.reset(f"{prefix}{i}", STOCK, strategy="atomic")
        warm_up(args, base, sku=f"{prefix}0", skus=SPREAD, **timing)
        runs["atomic, spread"] = wrk("atomic, spread", base, sku=f"{prefix}0", skus=SPREAD, **timing)
    if "redisson, hot, 8 segments" in only:
        sku = f"bench-servers-redisson-{tag}-0"
        admin.reset(sku, STOCK, segments=8, strategy="redisson")
        warm_up(args, base, sku=sku, **timing)
        runs["redisson, hot, 8 segments"] = wrk("redisson, hot, 8 segments", base, sku=sku, **timing)
    return runs


def _rows(value: str) -> tuple[str, ...]:
    """One ``--rows`` name: the rows it begins ("gate": both gate rows)."""
    found = tuple(row for row in ROWS if row.startswith(value.strip())) if value.strip() else ()
    if not found:
        raise argparse.ArgumentTypeError(f"{value.strip()!r} begins none of the rows: {'; '.join(ROWS)}")
    return found


def _shape(value: str) -> tuple[str | None, tuple[int, int]]:
    """``--shape 2x16``: workers × threads for every server; ``granian=1x32``: for one
    (None: every server)."""
    server, named, shape = value.rpartition("=")
    if named and server not in SERVERS:
        raise argparse.ArgumentTypeError(f"{server!r} is none of the servers: {', '.join(SERVERS)}")
    workers, _, threads = shape.partition("x")
    if not (workers.isdigit() and threads.isdigit() and int(workers) > 0 and int(threads) > 0):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not WORKERSxTHREADS (as 2x16) or SERVER=WORKERSxTHREADS (as granian=1x32)")
    return server or None, (int(workers), int(threads))


def _shapes(given: list[tuple[str | None, tuple[int, int]]] | None, stack: tuple[int, int]) -> dict:
    """Each server's shape: the stack's, unless ``--shape`` names one for it (or for every server)."""
    shapes = dict.fromkeys(SERVERS, stack)
    for server, shape in given or ():
        shapes.update(dict.fromkeys([server] if server else SERVERS, shape))
    return shapes


def alternating(rounds: int) -> list[str]:
    """gunicorn, granian, then granian, gunicorn, …: neither always runs first."""
    return [server for n in range(rounds) for server in (SERVERS if n % 2 == 0 else SERVERS[::-1])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="runs of every row under each server")
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--connections", type=int, default=64)
    add_warm_up(parser)
    parser.add_argument("--search", action="store_true",
                        help="first try each server in a few shapes (workers x threads) on ping and the gate")
    parser.add_argument("--requests", type=int, default=1000, help="per in-process row (Django's own CPU)")
    parser.add_argument("--rows", type=_rows, nargs="+", metavar="ROW",
                        help="only the rows these begin (a cut's before and after); with --docs, every row")
    parser.add_argument("--shape", type=_shape, nargs="+", metavar="[SERVER=]WORKERSxTHREADS",
                        help="both servers in this shape, or (SERVER=) one server (instead of the stack's, "
                             "or --search's best)")
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/servers.md, for the docs")
    args = parser.parse_args(argv)
    chosen = {row for rows_named in args.rows or [ROWS] for row in rows_named}
    args.rows = tuple(row for row in ROWS if row in chosen)
    if args.docs and args.rows != ROWS:
        parser.error("--docs reports every row")
    if shutil.which("wrk") is None:
        parser.error("wrk is not installed (make bench-servers installs it)")
    command = "python -m benchmarks.servers " + shlex.join(sys.argv[1:] if argv is None else argv)
    config = StackConfig.from_env()
    admin = FlashsaleClient.for_stack(config)
    meter = CpuMeter(Supervisor(config))

    searched: dict[tuple[str, int, int], dict[str, Run]] = {}
    best = _shapes(args.shape, (config.workers, config.threads))
    runs: dict[str, list[dict[str, Run]]] = {server: [] for server in SERVERS}
    with apps_as_needed(config, rolling=False) as use:  # nothing sells between two rows
        if args.search:
            for n, (workers, threads) in enumerate(SHAPES):
                for server in alternating(n + 1)[-2:]:  # the order flipped each shape
                    use(server=server, workers=workers, threads=threads, strategy="atomic",
                        section_delay_ms=0.0)
                    searched[server, workers, threads] = rows(
                        config, admin, meter, args, tag=f"s{n}-{server}", only=("ping", "gate, hot"))
            for server in SERVERS:
                best[server] = max(((w, t) for s, w, t in searched if s == server),
                                   key=lambda shape: searched[(server, *shape)]["gate, hot"].requests_per_s)
        for n, server in enumerate(alternating(args.rounds)):
            workers, threads = best[server]
            shape = dict(server=server, workers=workers, threads=threads, strategy="atomic",
                         section_delay_ms=0.0)
            use(**shape, gate_pipeline=True)
            together = tuple(row for row in args.rows if row != ALONE)
            run = rows(config, admin, meter, args, tag=f"{n}-{server}", only=together)
            if ALONE in args.rows:
                use(**shape, gate_pipeline=False)
                run |= rows(config, admin, meter, args, tag=f"{n}-{server}", only=(ALONE,))
            runs[server].append(run)

    django = app_cpu(args.requests)
    with recorded("servers", command, write=args.docs):
        _report(command, args, config, best, searched, runs, django)
    return 0


def _median(runs: list[dict[str, Run]], row: str, figure) -> float:
    return statistics.median(figure(run[row]) for run in runs)


def _against_alone(runs: dict[str, list[dict[str, Run]]]) -> str:
    """Each server's gate with the scripts together over the first server's with
    each script alone: the medians' ratio, each round's (the two runs of a round
    are minutes apart at most, so the machine's drift cancels), and the CPU an
    answer's (what the same cores carry, which others' load on them moves less)."""
    first = SERVERS[0]
    alone = [run[ALONE] for run in runs[first]]
    before = statistics.median(r.requests_per_s for r in alone)
    cpu_before = statistics.median(sum(r.cpu_us.values()) for r in alone)
    parts = []
    for server in SERVERS:
        together = [run["gate, hot"] for run in runs[server]]
        rounds = [t.requests_per_s / a.requests_per_s for t, a in zip(together, alone, strict=True)]
        rate = statistics.median(r.requests_per_s for r in together)
        cpu = statistics.median(sum(r.cpu_us.values()) for r in together)
        parts.append(f"{server} with them together **{rate / before:.2f}×** "
                     f"(round by round {', '.join(f'{x:.2f}' for x in rounds)}: median "
                     f"{statistics.median(rounds):.2f}; CPU an answer {cpu_before / cpu:.2f}×)")
    return (f"The gate on one hot product against {first} with each script in a round trip of its own "
            f"(`{ALONE}`, `FLASHSALE_GATE_PIPELINE=false`), answers/s: " + "; ".join(parts) + ".")


def _report(command: str, args, config: StackConfig, best: dict, searched: dict, runs: dict,
            django: dict[str, float]) -> None:
    print(f"`{command}` ({os.cpu_count()} cores shared by every process and the load client): wrk -t2 "
          f"-c{args.connections}, {args.seconds:g} s a row; {config.instances} instances, "
          f"{config.persisters} persisters\n")
    if searched:
        print("The shapes tried, one run each (answers/s):\n")
        print("| server | workers × threads | ping | gate, hot |\n|---|---|---:|---:|")
        for (server, workers, threads), found in searched.items():
            mark = " **(best)**" if best[server] == (workers, threads) else ""
            print(f"| {server} | {workers} × {threads}{mark} | {found['ping'].requests_per_s:,.0f} "
                  f"| {found['gate, hot'].requests_per_s:,.0f} |")
        print()
    first, second = SERVERS
    shapes = ", ".join(f"{s} {w} × {t}" for s, (w, t) in best.items())
    print(f"Each row under each server, {args.rounds} rounds, alternating (workers × threads: {shapes}); "
          "medians:\n")
    print(f"| row | {first} answers/s | {second} answers/s | {second} ÷ {first} | p99 ms, {first} / {second} "
          f"| CPU µs an answer, {first} / {second} | the apps' CPU µs, {first} / {second} |")
    print("|---|---:|---:|---:|---|---|---|")
    for row in args.rows:
        rate = {s: _median(runs[s], row, lambda r: r.requests_per_s) for s in SERVERS}
        p99 = {s: _median(runs[s], row, lambda r: r.p99_ms) for s in SERVERS}
        cpu = {s: _median(runs[s], row, lambda r: sum(r.cpu_us.values())) for s in SERVERS}
        apps = {s: _median(runs[s], row, lambda r: r.cpu_us["apps"]) for s in SERVERS}
        print(f"| {row} | {rate[first]:,.0f} | {rate[second]:,.0f} | **{rate[second] / rate[first]:.2f}** "
              f"| {p99[first]:.1f} / {p99[second]:.1f} | {cpu[first]:,.0f} / {cpu[second]:,.0f} "
              f"| {apps[first]:,.0f} / {apps[second]:,.0f} |")
    if {"gate, hot", ALONE} <= set(args.rows):
        print("\n" + _against_alone(runs))
    print("\nEach round's answers/s, in the order run (the spread is the machine's noise):\n")
    print(f"| row | {first} | {second} |\n|---|---|---|")
    for row in args.rows:
        print(f"| {row} | " + " | ".join(", ".join(f"{run[row].requests_per_s:,.0f}" for run in runs[s])
                                        for s in SERVERS) + " |")
    print(f"\nThe apps' CPU an answer, µs, split: Django's own (`benchmarks.purchase_cpu --requests "
          f"{args.requests}`: in-process, one request at a time, the same under either server) and the rest, "
          "what serving it under load adds:\n")
    print(f"| row | Django | the rest, {first} | the rest, {second} | the rest, {second} ÷ {first} |")
    print("|---|---:|---:|---:|---:|")
    below = []
    for row in args.rows:
        own = django[IN_PROCESS[row]]
        rest = {s: _median(runs[s], row, lambda r: r.cpu_us["apps"]) - own for s in SERVERS}
        if min(rest.values()) < 0:
            below.append(row)
        print(f"| {row} | {own:,.0f} | {rest[first]:,.0f} | {rest[second]:,.0f} "
              f"| {rest[second] / rest[first]:.2f} |")
    if below:
        print(f"\nWhere the rest is below 0 ({'; '.join(below)}), Django's in-process figure is no floor: "
              "one request at a time pays each round trip's wake-ups and system calls alone, which a "
              "loaded process shares between the requests waiting at once.")
    print("\nCPU per answer by role, µs, medians (user + system from psutil; `apps`: the instances' "
          "processes, the server and Django; `wrk`: the load client):\n")
    print("| row | server | " + " | ".join([*ROLES, "wrk"]) + " |")
    print("|---|---|" + "---:|" * (len(ROLES) + 1))
    for row in args.rows:
        for server in SERVERS:
            print(f"| {row} | {server} | " + " | ".join(
                f"{_median(runs[server], row, lambda r, role=role: r.cpu_us[role]):,.0f}"
                for role in [*ROLES, "wrk"]) + " |")


if __name__ == "__main__":
    sys.exit(main())
