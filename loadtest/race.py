"""``make race``: every strategy chosen against the same buyers at once, from a
terminal: the race the page's Race button starts, followed with a progress bar, and
its final table.

    python -m loadtest.race [--strategies none,local,setnx,redisson,zookeeper,atomic]
                            [--stock 100] [--buyers 1000] [--concurrency 64] [--room-rate N]

The race runs in the stack (its runner process, ``manage.py run_races``), so this
only starts it and reads it; ``http://127.0.0.1:8080/race`` shows the same race live.
A race shows correctness, not speed: the strategies share the machine while they
race (``make compare`` measures them one at a time). With ``--room-rate``, every
product's sale has a waiting room admitting that many buyers a second: the buyers
wait their turns there, and the table adds each room's admissions.
"""

from __future__ import annotations

import argparse
import sys
import time

from common.strategies import STRATEGIES, strategy_get
from races.limits import DEFAULT_STRATEGIES, MAX_BUYERS, MAX_CONCURRENCY
from stack.config import StackConfig
from stack.servers import race_histories

from .client import FlashsaleClient
from .report import markdown_table

POLL_S = 0.25
BAR = 30

COLUMNS = [
    ("strategy", lambda lane: lane["strategy"]),
    ("orders / stock", lambda lane: f"{lane['orders']} / {lane['stock']}"),
    ("oversold", lambda lane: str(lane["oversold"])),
    ("lost updates", lambda lane: str(lane["lost_updates"])),
    ("ledger", lambda lane: "ok" if lane["consistent"] else "BROKEN"),
    ("sold out", lambda lane: str(lane["sold_out"])),
    ("busy", lambda lane: str(lane["busy"])),
    ("errors", lambda lane: str(lane["errors"])),
    ("orders/s", lambda lane: "–" if lane["orders_per_s"] is None else f"{lane['orders_per_s']:,.0f}"),
    ("p50/p99 ms", lambda lane: "–/–" if lane["p50_ms"] is None
     else f"{lane['p50_ms']:,.0f}/{lane['p99_ms']:,.0f}"),
    ("verdict", lambda lane: lane["verdict"] or "–"),
]
ROOM_COLUMNS = [
    ("admitted", lambda lane: str(lane["room"]["admitted"])),
    ("most waiting", lambda lane: str(max((tick[1] for tick in lane["room"]["series"]), default=0))),
]


def progress_line(race: dict) -> str:
    """One line: the bar, and each strategy's orders so far (oversold marked)."""
    done = race["answered"] / race["total"] if race["total"] else 0.0
    filled = int(done * BAR)
    lanes = "  ".join(f"{lane['strategy']} {lane['orders']}"
                      + (f" (oversold {lane['oversold']})" if lane["oversold"] else "")
                      + (f" ({lane['room']['waiting']} waiting)" if lane.get("room") else "")
                      for lane in race["lanes"])
    return f"[{'#' * filled}{'.' * (BAR - filled)}] {done:4.0%} {race['elapsed_s']:5.1f}s  {lanes}"


def follow(client: FlashsaleClient, race_id: int, *, out=sys.stdout) -> dict:
    """Read the race every ``POLL_S`` until it is over, drawing its progress."""
    while True:
        response = client.race(race_id)
        response.raise_for_status()
        race = response.json()
        if out.isatty():
            out.write("\r" + progress_line(race)[:200])
            out.flush()
        if race["status"] not in ("queued", "running"):
            out.write(("\n" if out.isatty() else "") + progress_line(race) + "\n")
            return race
        time.sleep(POLL_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.race", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES),
                        help=f"comma-separated, of: {', '.join(STRATEGIES)} "
                             f"(default {','.join(DEFAULT_STRATEGIES)})")
    parser.add_argument("--stock", type=int, default=100)
    parser.add_argument("--buyers", type=int, default=1000, help=f"per strategy, at most {MAX_BUYERS:,}")
    parser.add_argument("--concurrency", type=int, default=64, help=f"at most {MAX_CONCURRENCY}")
    parser.add_argument("--room-rate", type=int, default=None,
                        help="a waiting room before every sale, admitting this many buyers a second")
    args = parser.parse_args(argv)
    try:
        strategies = [strategy_get(name.strip()).name for name in args.strategies.split(",")]
    except ValueError as e:
        parser.error(str(e))

    config = StackConfig.from_env()
    client = FlashsaleClient.for_stack(config)
    room = {} if args.room_rate is None else {"room_rate": args.room_rate}
    started = client.race_start(strategies, stock=args.stock, buyers=args.buyers,
                                concurrency=args.concurrency, **room)
    if started.status_code != 201:
        print(f"the race was refused: {started.status_code} {started.text}", file=sys.stderr)
        return 1
    race = started.json()
    print(f"Race {race['id']}: {', '.join(strategies)}; {args.buyers:,} buyers each buy 1 unit of every "
          f"product ({args.stock:,} in stock each), {args.concurrency} at a time"
          + ("" if args.room_rate is None else f", through waiting rooms admitting {args.room_rate} a second")
          + f". "
          f"Live: {config.base_url}/race?id={race['id']}", flush=True)
    race = follow(client, race["id"])
    if race["status"] != "finished":
        print(f"race {race['id']} {race['status']}: {race['error']}", file=sys.stderr)
        return 1
    print()
    print(markdown_table(race["lanes"], COLUMNS + (ROOM_COLUMNS if race["room"] else [])))
    print(f"\n{race['elapsed_s']:.1f} s. A race shows correctness, not speed: the strategies shared the "
          "machine (make compare measures each alone).")
    history = race_histories(config) / f"race-{race['id']}.jsonl"
    if history.exists():
        print(f"Its history: {history} (python -m verdicts check {history})")
    broken = [lane["strategy"] for lane in race["lanes"]
              if strategy_get(lane["strategy"]).claims_correct and lane["verdict"] != "held"]
    if broken:
        print(f"FAIL: {', '.join(broken)} claim correctness but did not hold", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
