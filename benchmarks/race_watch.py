"""Does watching a race change it? The same race with nobody watching, with its
state read 4 times a second by plain clients, and with the race page open.

    python -m benchmarks.race_watch [--rounds 3] [--viewers 1] [--strategies none,local,...] [--docs]
                                    [--stock 100] [--buyers 1000] [--concurrency 64]

Rounds alternate: the race with nobody watching; the same race while a client reads
``/api/races/<id>`` every 250 ms, which is what the page asks of the stack
(``--viewers N``: N such clients, a class watching from their own machines); and the
same race started from the page (``/race``, its Race button) in a headless Chromium,
which follows it, drawing on the stack's two cores as it does. Per race: the
purchases answered per second over the whole race, and each strategy's orders/s
(orders ÷ seconds to its last order). Medians of the rounds, each beside nobody
watching, as ratios; and how often each watcher read the race.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from loadtest.client import FlashsaleClient
from loadtest.measured import recorded
from races.limits import DEFAULT_STRATEGIES
from stack.config import StackConfig

WATCHERS = ("closed", "polled", "page")
POLL_S = 0.25  # the page's pace
# Chromium reads the last --disable-features it is given, and Playwright gives one of its
# own first: so this one is Playwright's list (its pinned release's, which
# tests/test_chromium.py checks is all still here) and the omnibox popup's WebUI, which
# headless Chromium otherwise draws, unseen, for each new context, at more CPU than the
# test's page costs.
PLAYWRIGHT_DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable", "LensOverlay", "MediaRouter", "PaintHolding",
    "ThirdPartyStoragePartitioning", "AvoidCorsURLLoaderRestartOnRedirect", "TcpPortRandomizationWin",
    "OptimizationHints", "NetworkTimeServiceQuerying", "AimEnabled", "PreconnectToSearch",
    "msForceBrowserSignIn", "msEdgeUpdateLaunchServicesPreferredVersion")
OMNIBOX_POPUP_FEATURES = ("WebUIOmniboxPopup", "WebUIOmniboxAimPopup", "WebUIOmniboxFullPopup")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--disable-features={','.join(PLAYWRIGHT_DISABLED_FEATURES + OMNIBOX_POPUP_FEATURES)}"]


@contextmanager
def chromium() -> Iterator:
    """Debian's Chromium, headless, driven by Playwright (a test dependency: `make
    install-test`), closed on the way out: the browser tests' and this benchmark's."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def race_once(client: FlashsaleClient, spec: dict, *, watcher: str, browser=None,
              viewers: int = 1) -> tuple[dict, float]:
    """Run one race to its end, watched by ``watcher`` (``closed``, ``polled`` by
    ``viewers`` clients, or ``page``). Returns the finished race and how many times a
    second it was read."""
    reads: list[float] = []
    page = None
    if watcher == "page":
        # As a person races: the page loaded first, then its Race button. Nothing of
        # Playwright's runs while the page follows the race (no event listener, no
        # polling of the page): its driver would take the cores too.
        page = browser.new_page()
        page.goto(f"{client.base_url}/race")
        page.on("dialog", lambda dialog: dialog.accept(client.admin_token))
        for box in page.locator("[name=strategy]").all():
            box.set_checked(box.get_attribute("value") in spec["strategies"])
        for field in ("stock", "buyers", "concurrency"):
            page.fill(f"#{field}", str(spec[field]))
        with page.expect_response("**/api/admin/races") as started:
            page.click("#race-button")
        race_id = started.value.json()["id"]
    else:
        response = client.race_start(**spec)
        response.raise_for_status()
        race_id = response.json()["id"]
    stop = threading.Event()
    if watcher == "polled":
        def poll() -> None:
            reader = FlashsaleClient(client.base_url)
            while not stop.is_set():
                sent = time.monotonic()
                reader.race(race_id).raise_for_status()
                reads.append(1)
                stop.wait(max(0.0, POLL_S - (time.monotonic() - sent)))

        for _ in range(viewers):
            threading.Thread(target=poll, daemon=True).start()
    while True:
        race = client.race(race_id).json()
        if race["status"] not in ("queued", "running"):
            break
        time.sleep(0.5)
    stop.set()
    if page is not None:
        page.wait_for_function(f"document.getElementById('status').textContent.startsWith('race {race_id}: ')"
                               " && !/queued|running/.test(document.getElementById('status').textContent)")
        reads = page.evaluate("performance.getEntriesByType('resource')"
                              ".filter((e) => e.name.includes('/api/races/')).length") * [1]
        page.close()
    if race["status"] != "finished":
        raise SystemExit(f"race {race_id} {race['status']}: {race['error']}")
    return race, len(reads) / race["elapsed_s"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.race_watch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES))
    parser.add_argument("--stock", type=int, default=100)
    parser.add_argument("--buyers", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--viewers", type=int, default=1,
                        help="clients reading the race 4 times a second each in the polled rounds (a class)")
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/race-watch.md, for the docs")
    args = parser.parse_args(argv)
    spec = {"strategies": args.strategies.split(","), "stock": args.stock, "buyers": args.buyers,
            "concurrency": args.concurrency}
    client = FlashsaleClient.for_stack(StackConfig.from_env())
    runs: dict[str, list[tuple[dict, float]]] = {watcher: [] for watcher in WATCHERS}
    with chromium() as browser:
        for _ in range(args.rounds):
            for watcher in WATCHERS:
                runs[watcher].append(race_once(client, spec, watcher=watcher, browser=browser,
                                               viewers=args.viewers))

    def rate(race: dict) -> float:
        return race["answered"] / race["elapsed_s"]

    def median(values) -> float:
        return statistics.median(values)

    def cells(figure) -> list[str]:
        closed = median(figure(race) for race, _ in runs["closed"])
        out = [f"{closed:,.1f}"]
        for watcher in WATCHERS[1:]:
            watched = median(figure(race) for race, _ in runs[watcher])
            out.append(f"{watched:,.1f} ({watched / closed if closed else float('nan'):.2f})")
        return out

    command = f"python -m benchmarks.race_watch {shlex.join(argv if argv is not None else sys.argv[1:])}"
    with recorded("race-watch", command.strip(), write=args.docs):
        print(f"$ {command.strip()}")
        print(f"{args.rounds} rounds, alternating; {len(spec['strategies'])} strategies, stock {args.stock}, "
              f"{args.buyers} buyers each, {args.concurrency} at once; medians, and ÷ nobody watching\n")
        readers = "a client" if args.viewers == 1 else f"{args.viewers} clients"
        print(f"| | nobody watching | read 4×/s by {readers} | the page open in Chromium |")
        print("|---|---:|---:|---:|")
        print("| answers/s, whole race | " + " | ".join(cells(rate)) + " |")
        for i, name in enumerate(spec["strategies"]):
            orders_per_s = lambda race, i=i: race["lanes"][i]["orders_per_s"] or 0  # noqa: E731
            print(f"| {name} orders/s | " + " | ".join(cells(orders_per_s)) + " |")
        print("| reads of the race per second | – | "
              + " | ".join(f"{median(r for _, r in runs[w]):.1f}" for w in WATCHERS[1:]) + " |")
        rounds = ("/".join(f"{rate(runs[w][n][0]):,.0f}" for w in WATCHERS) for n in range(args.rounds))
        print(f"\nEach round's answers/s ({', '.join(WATCHERS)}): {'; '.join(rounds)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
