"""People against a bot, for the places of a sale's waiting room, with the room's
proof of work off and on: the bot's share of the stock, the people's median wait for
their admission, and the server's CPU to check one solution.

    python -m benchmarks.bots [--rounds 2] [--stock 30] [--people 60] [--accounts 300]
                              [--bot-threads 4] [--bits 16 20] [--checks 5000] [--docs]
    (make bench-bots: starts the stack, runs this)

Each round runs the sale with the work off and at each ``--bits`` (in turn, the order
reversed from round to round): a product reset under ``atomic`` with a first-come waiting room
(``RATE`` admissions a second) that opens ``OPEN_IN_S`` after the reset. **People**:
one account and one place each, arriving evenly over the ``SPREAD_S`` before the
opening. Each person's device solves her place's challenge for her alone: the
people's solutions are solved before the sale, one core each, and a person who is
asked for work waits as long as her solution took (its CPU time) before she sends it.
**The bot**: ``--accounts`` accounts, asked for places from the reset on by
``--bot-threads`` threads as fast as they go, each place's challenge solved first, in
a process per thread on this machine's cores, which the stack shares (its rig is what
the machine has to spare), while ``WATCHERS`` threads of its own ask again for the
places taken, as often as they can, and buy with each admission. People ask again
every ``POLL_S`` until admitted, then buy one unit.

The server's CPU a check, in one process with the stack's settings: the solution read
(``challenge_read``: its signature and hash), and a new buyer's whole place asked in
a room with work and in one without (``place_ask``), the app's CPU and Redis's
(``INFO cpu``) a place, the difference: the work's single use is a ``SET NX`` in the
room's own script, on the call the ask makes anyway.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue
import shlex
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import requests

from common.work import challenge_solve
from loadtest.buyers import buyer_tokens
from loadtest.client import FlashsaleClient
from loadtest.measured import recorded
from stack.config import ROOT, StackConfig

RATE = 20  # admissions a second
OPEN_IN_S = 4.0  # the sale (and its room's admissions) opens this long after the reset
SPREAD_S = 3.0  # the people arrive over the first this many seconds
POLL_S = 0.5  # how often a place is asked for again
SALE_S = 60.0  # a sale still selling after this long is ended
WATCHERS = 4  # the bot's threads asking again for its places (no work: one request each)


@dataclass
class Sale:
    """What one sale's people and bot got."""

    bits: int  # the room's proof of work (0: none)
    bot_places_before_opening: int = 0
    bot_units: int = 0
    people_units: int = 0
    people_waits: list[float] = field(default_factory=list)  # arrival to admission, s, of those admitted
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def _place(client: FlashsaleClient, sku: str, buyer: str) -> dict | None:
    response = client.room(sku, buyer)
    return response.json() if response.status_code == 200 else None


def _bought(client: FlashsaleClient, sku: str, buyer: str, admission: str) -> bool:
    return client.order(sku, 1, buyer, admission=admission).status_code == 201


def person(base: str, tokens: dict, sku: str, buyer: str, arrives: float, sale: Sale, over: threading.Event,
           solve):
    client = FlashsaleClient(base, tokens=tokens, solve=solve)
    over.wait(max(arrives - time.monotonic(), 0))
    arrived = time.monotonic()
    while not over.is_set():
        place = _place(client, sku, buyer)
        if place is not None and place["state"] == "admitted":
            waited = time.monotonic() - arrived
            got = _bought(client, sku, buyer, place["admission"])
            with sale.lock:
                sale.people_waits.append(waited)
                sale.people_units += got
            return
        if place is not None and place["state"] == "used":
            return
        over.wait(POLL_S)


def bot(base: str, tokens: dict, sku: str, accounts: list[str], opens: float, sale: Sale,
        over: threading.Event, solve, placed: queue.Queue):
    """One of the bot's takers: a place for each of its accounts, as fast as it goes
    (each with its work), handed to the bot's watcher."""
    client = FlashsaleClient(base, tokens=tokens, solve=solve)
    for account in accounts:
        if over.is_set():
            return
        if _place(client, sku, account) is not None:
            placed.put(account)
            if time.monotonic() < opens:
                with sale.lock:
                    sale.bot_places_before_opening += 1


def bot_watcher(base: str, tokens: dict, sku: str, sale: Sale, over: threading.Event, placed: queue.Queue):
    """The bot's watcher: asks again for every place its takers took, one cheap request
    each (a place needs no more work), and buys with each admission as it comes."""
    client = FlashsaleClient(base, tokens=tokens)
    waiting: list[str] = []
    while not over.is_set():
        while not placed.empty():
            waiting.append(placed.get())
        for account in list(waiting):
            place = _place(client, sku, account)
            if place is None or place["state"] == "waiting":
                continue
            waiting.remove(account)
            if place["state"] == "admitted":
                got = _bought(client, sku, account, place["admission"])
                with sale.lock:
                    sale.bot_units += got
        over.wait(POLL_S / 5 if waiting else 0.05)


def one_sale(config: StackConfig, args, *, bits: int, people: dict, bots: dict) -> Sale:
    admin = FlashsaleClient.for_stack(config)
    sku = f"bench-bots-{uuid.uuid4().hex[:8]}"
    sale, over = Sale(bits=bits), threading.Event()
    tokens = people | bots
    # Solved in processes, not in this one's threads (which share one interpreter
    # lock): each person's device, and the bot's, work beside each other.
    spawn = multiprocessing.get_context("spawn")  # not a fork of this process's threads
    with (ProcessPoolExecutor(os.cpu_count(), mp_context=spawn) as devices,
          ProcessPoolExecutor(args.bot_threads, mp_context=spawn) as rig):
        for pool, size in ((devices, os.cpu_count()), (rig, args.bot_threads)):
            list(pool.map(challenge_solve, ["warm-up"] * size, [1] * size))  # started before the sale
        presolved = queue.Queue()
        if bits:
            admin.reset(sku, args.stock, strategy="atomic", starts_in=3600, room_rate=RATE,
                        room_challenge_bits=bits)
            for solved in on_their_devices(devices, config.base_url, sku, len(people)):
                presolved.put(solved)
        admin.reset(sku, args.stock, strategy="atomic", starts_in=int(OPEN_IN_S), room_rate=RATE,
                    room_active=2 * RATE, room_challenge_bits=bits)
        started = time.monotonic()
        opens = started + OPEN_IN_S
        threads = [threading.Thread(target=person, args=(
            config.base_url, tokens, sku, buyer, started + SPREAD_S * n / len(people), sale, over,
            device(presolved))) for n, buyer in enumerate(people)]
        accounts, share, placed = list(bots), args.bot_threads, queue.Queue()
        threads += [threading.Thread(target=bot, args=(
            config.base_url, tokens, sku, accounts[n::share], opens, sale, over, solver(rig), placed))
            for n in range(share)]
        threads += [threading.Thread(target=bot_watcher, args=(config.base_url, tokens, sku, sale, over,
                                                               placed))
                    for _ in range(WATCHERS)]
        for thread in threads:
            thread.start()
        while time.monotonic() < started + SALE_S:
            time.sleep(POLL_S)
            with sale.lock:
                if sale.bot_units + sale.people_units >= args.stock:
                    break
        over.set()
        for thread in threads:
            thread.join()
    return sale


def solver(pool: ProcessPoolExecutor):
    return lambda token, bits: pool.submit(challenge_solve, token, bits).result()


def on_their_devices(pool: ProcessPoolExecutor, base: str, sku: str, people: int) -> list[tuple[str, float]]:
    """A solution for each person, of a challenge of the room's (any of its challenges
    takes a place, once), with the CPU seconds it took: each solved on a core alone
    before the sale, as each person's own device solves hers."""
    challenges = [requests.post(f"{base}/api/products/{sku}/room/challenge", timeout=10).json()
                  for _ in range(people)]
    return list(pool.map(_timed_solve, [c["challenge"] for c in challenges], [c["bits"] for c in challenges]))


def _timed_solve(token: str, bits: int) -> tuple[str, float]:
    started = time.process_time()
    solution = challenge_solve(token, bits)
    return solution, time.process_time() - started


def device(presolved: queue.Queue):
    """A person's device: it takes as long as her solution took to solve, and gives it."""
    def solve(token: str, bits: int) -> str:
        solution, took = presolved.get_nowait()
        time.sleep(took)
        return solution
    return solve


@dataclass(frozen=True)
class CheckCost:
    """What a place with work costs beyond one without, µs an ask."""

    read_us: float  # the app: the solution read (signature, hash)
    ask_us: float  # the app: the whole ask, with a proof against without
    redis_us: float  # Redis: the ask's script, with a proof (its SET NX) against without


def check_cost(config: StackConfig, checks: int) -> CheckCost:
    """Measured in a process with the stack's settings (``_check_only``)."""
    env = {**os.environ, **config.app_environment("bench-bots")}
    done = subprocess.run([sys.executable, "-m", "benchmarks.bots", "--check-only", str(checks)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return CheckCost(**json.loads(done.stdout.strip().splitlines()[-1]))


def _check_only(checks: int) -> None:
    import django

    django.setup()
    from common.challenges import challenge_issue, challenge_read
    from common.gateredis import gate_redis
    from orders.reset import sale_reset
    from waitingroom.services import RoomTerms, place_ask, room_purpose

    def redis_cpu_s() -> float:
        cpu = gate_redis().info("cpu")
        return cpu["used_cpu_user"] + cpu["used_cpu_sys"]

    def asks(sku: str, solutions: list) -> tuple[float, float]:
        """Each solution (None: no work) a new buyer's place; the app's and Redis's CPU
        an ask, µs."""
        place_ask(sku=sku, buyer="warm-up", solution=solutions.pop())  # connected, scripts loaded
        app, server = time.process_time(), redis_cpu_s()
        for solution in solutions:
            place_ask(sku=sku, buyer=uuid.uuid4().hex, solution=solution)
        return ((time.process_time() - app) / len(solutions) * 1e6,
                (redis_cpu_s() - server) / len(solutions) * 1e6)

    run = uuid.uuid4().hex[:6]
    plain, work = f"bench-check-{run}-plain", f"bench-check-{run}-work"
    for sku, bits in ((plain, 0), (work, 8)):
        sale_reset(sku=sku, stock=1, strategy="atomic", room=RoomTerms.given(rate=1, challenge_bits=bits))
    solutions = [challenge_solve(challenge_issue(purpose=room_purpose(work), bits=8).token, 8)
                 for _ in range(checks)]
    started = time.process_time()
    for solution in solutions:
        challenge_read(solution=solution, purpose=room_purpose(work))
    read_us = (time.process_time() - started) / len(solutions) * 1e6
    # Alternating tenths, so that neither side has the quieter moments to itself.
    tenth = max(checks // 10, 2)
    plain_asks, work_asks = [], []
    for start in range(0, checks, tenth):
        plain_asks.append(asks(plain, [None] * tenth))
        work_asks.append(asks(work, solutions[start:start + tenth]))
    more = [(w[0] - p[0], w[1] - p[1]) for w, p in zip(work_asks, plain_asks, strict=True)]
    print(json.dumps({"read_us": read_us, "ask_us": statistics.mean(m[0] for m in more),
                      "redis_us": statistics.mean(m[1] for m in more)}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--stock", type=int, default=30)
    parser.add_argument("--people", type=int, default=60)
    parser.add_argument("--accounts", type=int, default=300, help="the bot's")
    parser.add_argument("--bot-threads", type=int, default=4, help="the bot's, each with a process to solve")
    parser.add_argument("--bits", type=int, nargs="+", default=[16, 20],
                        help="the room's proof of work in the sales with work, one row each")
    parser.add_argument("--checks", type=int, default=5000,
                        help="places asked with work (and as many without), for the CPU a check")
    parser.add_argument("--check-only", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/bots.md, for the docs")
    args = parser.parse_args(argv)
    if args.check_only:
        _check_only(args.check_only)
        return 0
    command = "python -m benchmarks.bots " + shlex.join(sys.argv[1:] if argv is None else argv)
    config = StackConfig.from_env()
    run = uuid.uuid4().hex[:6]
    people = buyer_tokens(config, prefix=f"bots-{run}-person-", count=args.people)
    bots = buyer_tokens(config, prefix=f"bots-{run}-bot-", count=args.accounts)
    sales = []
    for n in range(args.rounds):
        each = [0, *args.bits]
        for bits in each if n % 2 == 0 else each[::-1]:
            sales.append(one_sale(config, args, bits=bits, people=people, bots=bots))
            print(json.dumps({"bits": bits, "bot": sales[-1].bot_units, "people": sales[-1].people_units}),
                  file=sys.stderr)
    cost = check_cost(config, args.checks)

    def row(bits: int) -> str:
        these = [s for s in sales if s.bits == bits]
        share = statistics.median(s.bot_units / max(s.bot_units + s.people_units, 1) for s in these)
        waits = [statistics.median(s.people_waits) for s in these if s.people_waits]
        wait = f"{statistics.median(waits):.1f}" if waits else "–"
        each = ", ".join(f"{s.bot_units}/{s.people_units}" for s in these)
        early = statistics.median(s.bot_places_before_opening for s in these)
        return (f"| {f'{bits} bits' if bits else 'off'} | {early:.0f} | **{share:.0%}** | "
                f"{statistics.median(s.people_units for s in these):.0f} | {wait} | {each} |")

    with recorded("bots", command, write=args.docs):
        print(f"`{command}` ({os.cpu_count()} cores shared by the stack, the people and the bot)\n")
        print(f"A sale of {args.stock} units behind a first-come waiting room ({RATE} admissions a second, "
              f"opening {OPEN_IN_S:g} s after its reset); {args.people} people (one account and one place "
              f"each, arriving over the first {SPREAD_S:g} s, each solving on a device of her own) against a "
              f"bot ({args.accounts} accounts, {args.bot_threads} threads asking from the reset on, solving "
              f"on this machine); {args.rounds} sale(s) each way, "
              "medians:\n")
        print("| the room's proof of work | the bot's places before the opening | the bot's share of the "
              "stock | people who bought | people's wait for admission, s | each sale, units bot/people |\n"
              "|---|---:|---:|---:|---:|---|")
        for bits in (0, *args.bits):
            print(row(bits))
        print(f"\nWhat checking a place's work costs the server, µs a place ({args.checks:,} places in "
              "rooms with work and without, the difference):\n\n"
              "| the app: the solution read (signature, hash) | the app: the whole ask | "
              "Redis: the ask's script |\n|---:|---:|---:|\n"
              f"| {cost.read_us:.0f} | **{cost.ask_us:.0f}** | {cost.redis_us:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
