"""Does watching a race change it? The same race with the race page closed and open.

    python -m benchmarks.race_watch [--rounds 3] [--strategies none,local,...]
                                    [--stock 100] [--buyers 1000] [--concurrency 64]

Rounds alternate: the race with nobody watching, then the same race with the page
(``/race?id=<id>``) open in a headless Chromium, which reads the race 4 times a
second while it runs. Per race: the purchases answered per second over the whole
race, and each strategy's orders/s (orders ÷ seconds to its last order). The medians
of the rounds, closed beside open, as ratios; and the page's own reads per second,
what watching costs the stack.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time

from loadtest.client import FlashsaleClient
from races.limits import DEFAULT_STRATEGIES
from stack.config import StackConfig

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def race_once(client: FlashsaleClient, spec: dict, *, browser=None) -> tuple[dict, int]:
    """Run one race to its end; with ``browser``, the page follows it. Returns the
    finished race and how many times the page read it."""
    response = client.race_start(**spec)
    response.raise_for_status()
    race_id = response.json()["id"]
    reads = 0
    if browser is not None:
        page = browser.new_page()
        counted = []
        page.on("request", lambda request: counted.append(1) if "/api/races/" in request.url else None)
        page.goto(f"{client.base_url}/race?id={race_id}")
        page.wait_for_function(
            f"document.getElementById('status').textContent.startsWith('race {race_id}: finished')",
            timeout=600_000, polling=100)
        reads = len(counted)
        page.close()
    while True:
        race = client.race(race_id).json()
        if race["status"] not in ("queued", "running"):
            break
        time.sleep(0.5)
    if race["status"] != "finished":
        raise SystemExit(f"race {race_id} {race['status']}: {race['error']}")
    return race, reads


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.race_watch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES))
    parser.add_argument("--stock", type=int, default=100)
    parser.add_argument("--buyers", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright  # a test dependency (make install-test)

    spec = {"strategies": args.strategies.split(","), "stock": args.stock, "buyers": args.buyers,
            "concurrency": args.concurrency}
    client = FlashsaleClient.for_stack(StackConfig.from_env())
    runs: dict[str, list[dict]] = {"closed": [], "open": []}
    page_reads = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            for _ in range(args.rounds):
                runs["closed"].append(race_once(client, spec)[0])
                race, reads = race_once(client, spec, browser=browser)
                runs["open"].append(race)
                page_reads.append(reads / race["elapsed_s"])
        finally:
            browser.close()

    def rate(race: dict) -> float:
        return race["answered"] / race["elapsed_s"]

    def median(values) -> float:
        return statistics.median(values)

    print(f"$ python -m benchmarks.race_watch {shlex.join(argv if argv is not None else sys.argv[1:])}")
    print(f"{args.rounds} rounds, alternating; {len(spec['strategies'])} strategies, stock {args.stock}, "
          f"{args.buyers} buyers each, {args.concurrency} at once; medians\n")
    print("| | page closed | page open | open ÷ closed |\n|---|---:|---:|---:|")
    closed, opened = median(rate(r) for r in runs["closed"]), median(rate(r) for r in runs["open"])
    print(f"| answers/s, whole race | {closed:,.0f} | {opened:,.0f} | {opened / closed:.2f} |")
    for i, name in enumerate(spec["strategies"]):
        c = median(r["lanes"][i]["orders_per_s"] or 0 for r in runs["closed"])
        o = median(r["lanes"][i]["orders_per_s"] or 0 for r in runs["open"])
        print(f"| {name} orders/s | {c:,.1f} | {o:,.1f} | {o / c if c else float('nan'):.2f} |")
    rounds = zip(runs["closed"], runs["open"], strict=True)
    print(f"\nThe page read the race {median(page_reads):.1f} times a second while it ran "
          f"(each round's answers/s, closed / open: "
          + ", ".join(f"{rate(c):,.0f} / {rate(o):,.0f}" for c, o in rounds) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
