"""What one request costs the app's Python, in-process: CPU per request through
the apps' WSGI handler (``flashsale.wsgi``: a plain purchase through its shortcut,
anything else through every middleware and the view; with
``FLASHSALE_PURCHASE_SHORTCUT=false`` every purchase through Django's whole path) against
the running stack's MariaDB and Redis, for ``/api/ping`` and for purchases of each kind; then,
with ``--profile ROW``, cProfile's top entries for that row.

    python -m benchmarks.purchase_cpu [--requests 2000] [--row ping --row gate] [--profile gate]
    python -m benchmarks.purchase_cpu --memory-rounds 3 --row "gate, sold out" --row gate --docs
    (the stack must be up: make up)

Rows:
- ``ping``: ``GET /api/ping``, the floor every request pays;
- ``product``: ``GET /api/products/<sku>``, the apps' own cached read;
- ``gate, sold out``: a gate product with no stock, every answer 409 (from the
  process's memory of the sold-out sale after the script's first);
- ``gate``: every purchase accepted (one hot product);
- ``atomic, spread``: every purchase buys, over 50 products, so nobody waits;
- ``setnx, spread``: the same under a Redis lock (taken, timed and released each time);
- ``redisson, hot, 8 segments``: one product in 8 segments under the Redisson lock
  (one request at a time here: nobody waits for the lock);
- ``…, signed in``: the row before it with ``FLASHSALE_BUYER_AUTH`` on, each purchase
  carrying a buyer's bearer token (the buyer from the token, checked in the shortcut);
- ``…, payment window``: the row's products reset with a payment window, each order
  born pending with its expiry;
- ``…, waiting room``: the row's product reset with a waiting room, each purchase by
  a buyer the room admitted (beforehand, not timed), carrying its admission, which
  the purchase checks and spends.

No gunicorn, nginx or load client: this is the app's own share of a request, the
part a change to the purchase path moves. Under load each request also pays
gunicorn's HTTP handling and the thread switches around every round trip; the wrk
benchmarks (``benchmarks.gate``) measure that whole. Writes products ``cpu-*`` to
the stack's database.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shlex
import statistics
import sys
import time
import uuid

from loadtest.measured import recorded
from stack.config import StackConfig

os.environ.update(StackConfig.from_env().app_environment("cpu"))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from buyers.tokens import token_issue  # noqa: E402
from orders.reset import sale_reset  # noqa: E402
from orders.wsgi import PurchaseWSGIHandler  # noqa: E402

SPREAD = 50


def _environ(method: str, path: str, body: bytes = b"", key: str | None = None) -> dict:
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8080",
               "HTTP_HOST": "127.0.0.1:8080", "REMOTE_ADDR": "127.0.0.1", "wsgi.url_scheme": "http",
               "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body)),
               "CONTENT_TYPE": "application/json"}
    if key:
        environ["HTTP_IDEMPOTENCY_KEY"] = key
    return environ


def _purchase(sku: str) -> dict:
    key = uuid.uuid4().hex
    body = json.dumps({"sku": sku, "quantity": 1, "user_id": key}).encode()
    return _environ("POST", "/api/orders", body, key=key)


_TOKENS: list[str] = []


def _signed_in_purchase(sku: str, n: int) -> dict:
    """A purchase by the n-th of 1,000 buyers, with its bearer token."""
    if not _TOKENS:
        _TOKENS.extend(token_issue(username=f"cpu-buyer-{i}").token for i in range(1000))
    key = uuid.uuid4().hex
    environ = _environ("POST", "/api/orders", json.dumps({"sku": sku, "quantity": 1}).encode(), key=key)
    environ["HTTP_AUTHORIZATION"] = f"Bearer {_TOKENS[n % len(_TOKENS)]}"
    return environ


SIGNED_IN = ", signed in"
WINDOW = ", payment window"
ROOM = ", waiting room"
_ADMITTED: list[tuple[str, str]] = []  # (buyer, admission), each spent by one purchase


def _admitted_purchase(sku: str) -> dict:
    """A purchase by the next buyer the room admitted, with its admission (the room
    admits another thousand when none is left)."""
    if not _ADMITTED:
        from waitingroom.services import place_ask

        buyers = [f"cpu-room-{uuid.uuid4().hex[:12]}" for _ in range(1000)]
        for buyer in buyers:
            place_ask(sku=sku, buyer=buyer)
        _ADMITTED.extend((buyer, place_ask(sku=sku, buyer=buyer).admission) for buyer in buyers)
    buyer, admission = _ADMITTED.pop()
    key = uuid.uuid4().hex
    body = json.dumps({"sku": sku, "quantity": 1, "user_id": buyer}).encode()
    environ = _environ("POST", "/api/orders", body, key=key)
    environ["HTTP_ADMISSION"] = admission
    return environ


def _room_opened(sku: str) -> None:
    from waitingroom.services import RoomTerms

    _ADMITTED.clear()
    # Admissions as fast as the setup asks (a second's worth kept at most), never a
    # slot short, and none running out during the row.
    sale_reset(sku=sku, stock=10**7, strategy="gate",
               room=RoomTerms(rate=100_000, active=10**7, admission_s=3600))


def _spread(prefix: str, strategy: str, **reset) -> None:
    for i in range(SPREAD):
        sale_reset(sku=f"{prefix}-{i}", stock=10**6, strategy=strategy, **reset)


def _rows() -> dict:
    """Each row: (set its sale up, the n-th request's environ)."""
    return {
        "ping": (lambda: None, lambda n: _environ("GET", "/api/ping")),
        "product": (lambda: sale_reset(sku="cpu-read", stock=10**6, strategy="atomic"),
                    lambda n: _environ("GET", "/api/products/cpu-read")),
        "gate, sold out": (lambda: sale_reset(sku="cpu-sold-out", stock=0, strategy="gate"),
                           lambda n: _purchase("cpu-sold-out")),
        "gate" + WINDOW: (lambda: sale_reset(sku="cpu-gate-window", stock=10**7, strategy="gate",
                                             payment_window_s=3600),
                          lambda n: _purchase("cpu-gate-window")),
        "gate": (lambda: sale_reset(sku="cpu-gate", stock=10**7, strategy="gate"),
                 lambda n: _purchase("cpu-gate")),
        "gate" + ROOM: (lambda: _room_opened("cpu-gate-room"), lambda n: _admitted_purchase("cpu-gate-room")),
        "gate" + SIGNED_IN: (lambda: sale_reset(sku="cpu-gate", stock=10**7, strategy="gate"),
                             lambda n: _signed_in_purchase("cpu-gate", n)),
        "atomic, spread": (lambda: [sale_reset(sku=f"cpu-spread-{i}", stock=10**6, strategy="atomic")
                                    for i in range(SPREAD)],
                           lambda n: _purchase(f"cpu-spread-{n % SPREAD}")),
        "atomic, spread" + SIGNED_IN: (lambda: None,  # the row before's products, bought on
                                       lambda n: _signed_in_purchase(f"cpu-spread-{n % SPREAD}", n)),
        "atomic, spread" + WINDOW: (lambda: _spread("cpu-window", "atomic", payment_window_s=3600),
                                    lambda n: _purchase(f"cpu-window-{n % SPREAD}")),
        "setnx, spread": (lambda: _spread("cpu-setnx", "setnx"),
                          lambda n: _purchase(f"cpu-setnx-{n % SPREAD}")),
        "setnx, spread" + WINDOW: (lambda: _spread("cpu-setnx-window", "setnx", payment_window_s=3600),
                                   lambda n: _purchase(f"cpu-setnx-window-{n % SPREAD}")),
        "redisson, hot, 8 segments": (lambda: sale_reset(sku="cpu-redisson", stock=10**7, segments=8,
                                                         strategy="redisson"),
                                      lambda n: _purchase("cpu-redisson")),
    }


def _measure(rows: dict, requests: int, handler) -> dict[str, tuple[float, float, str]]:
    """Each row's CPU and wall µs a request, and its answers by status."""
    statuses: dict[str, int] = {}

    def start_response(status, headers, exc_info=None):
        statuses[status[:3]] = statuses.get(status[:3], 0) + 1

    measured = {}
    for label, (setup, request) in rows.items():
        settings.FLASHSALE_BUYER_AUTH = label.endswith(SIGNED_IN)
        setup()
        for n in range(50):  # imports, connections, scripts registered
            b"".join(handler(request(n), start_response))
        statuses.clear()
        environs = [request(n) for n in range(requests)]
        cpu, wall = time.process_time(), time.perf_counter()
        for environ in environs:
            b"".join(handler(environ, start_response))
        cpu = (time.process_time() - cpu) / requests * 1e6
        wall = (time.perf_counter() - wall) / requests * 1e6
        answers = ", ".join(f"{code}: {count:,}" for code, count in sorted(statuses.items()))
        measured[label] = (cpu, wall, answers)
    return measured


def _memory_compared(rows: dict, requests: int, rounds: int, handler) -> None:
    """The rows with the strategy's memory off and on (``FLASHSALE_STRATEGY_MEMORY_S``
    0 and as set), alternating, ``rounds`` times each: medians of CPU a request ×
    ping's in the same round."""
    remembered = settings.FLASHSALE_STRATEGY_MEMORY_S
    ratios: dict[str, dict[str, list[float]]] = {"off": {}, "on": {}}
    for _ in range(rounds):
        for side, seconds in (("off", 0.0), ("on", remembered)):
            settings.FLASHSALE_STRATEGY_MEMORY_S = seconds
            measured = _measure(rows, requests, handler)
            ping = measured["ping"][0]
            for label, (cpu, _, _) in measured.items():
                ratios[side].setdefault(label, []).append(cpu / ping)
    settings.FLASHSALE_STRATEGY_MEMORY_S = remembered
    print(f"CPU a request × ping's in the same round, medians of {rounds} rounds each, memory off "
          f"(`FLASHSALE_STRATEGY_MEMORY_S=0`) and on ({remembered:g} s), alternating:\n")
    print(f"| row | memory off | memory on ({remembered:g} s) |\n|---|---:|---:|")
    for label in rows:
        if label != "ping":
            print(f"| {label} | {statistics.median(ratios['off'][label]):.2f} | "
                  f"{statistics.median(ratios['on'][label]):.2f} |")


def main() -> None:
    rows = _rows()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="per row")
    parser.add_argument("--row", action="append", dest="rows",
                        help="only this row (again for more, in their order; default: all)")
    parser.add_argument("--profile", choices=list(rows), help="cProfile this row too")
    parser.add_argument("--memory-rounds", type=int, default=0,
                        help="instead: the rows with the strategy's memory off and on, alternating, "
                             "this many rounds each (ping is always among the rows)")
    parser.add_argument("--docs", action="store_true",
                        help="also write the report to docs/results/measured/ (purchase-cpu.md; with "
                             "--memory-rounds, strategy-memory.md), for the docs")
    args = parser.parse_args()
    if args.rows:
        unknown = [r for r in args.rows if r not in rows]
        if unknown:
            parser.error(f"no such row: {'; '.join(unknown)} (rows: {'; '.join(rows)})")
        rows = {r: rows[r] for r in (["ping"] if args.memory_rounds and "ping" not in args.rows else [])
                + args.rows}
    handler = PurchaseWSGIHandler()  # the apps' handler (flashsale.wsgi)
    command = "python -m benchmarks.purchase_cpu " + shlex.join(sys.argv[1:])
    name = "strategy-memory" if args.memory_rounds else "purchase-cpu"
    with recorded(name, command.strip(), write=args.docs):
        print(f"`{command.strip()}`: CPU per request in-process (the apps' WSGI handler, the stack's "
              "MariaDB and Redis; purchase shortcut "
              f"{'on' if settings.FLASHSALE_PURCHASE_SHORTCUT else 'off'})\n")
        if args.memory_rounds:
            _memory_compared(rows, args.requests, args.memory_rounds, handler)
        else:
            print("| row | CPU µs / request | × ping | wall µs / request | answers |")
            print("|---|---:|---:|---:|---|")
            measured = _measure(rows, args.requests, handler)
            ping = next(iter(measured.values()))[0]
            for label, (cpu, wall, answers) in measured.items():
                print(f"| {label} | {cpu:,.0f} | {cpu / ping:.2f} | {wall:,.0f} | {answers} |")
    if args.profile:
        setup, request = rows[args.profile]
        settings.FLASHSALE_BUYER_AUTH = args.profile.endswith(SIGNED_IN)
        setup()
        environs = [request(n) for n in range(args.requests)]
        profile = cProfile.Profile()
        profile.enable()
        for environ in environs:
            b"".join(handler(environ, lambda *a, **k: None))
        profile.disable()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(40)
        print(f"\ncProfile, {args.profile}, {args.requests} requests, by cumulative time:\n{out.getvalue()}")


if __name__ == "__main__":
    main()
