"""What a Django process's start costs in CPU, with the collector running and paused
as ``flashsale.boot`` pauses it.

    python -m benchmarks.start_cost [--runs 15]

Two starts, each made both ways, one after the other and ``--runs`` times, so that both
ways find the machine as busy: an app instance's (what the gunicorn master does before
it forks: Django set up, the purchase handler built) and a management command's
(``manage.py expire_orders --help``: Django set up, the command loaded and its
arguments parsed). "Collected" is Django's own start; "paused" is the project's entry
points, ``flashsale/wsgi.py`` and ``manage.py``. Each start is a fresh interpreter,
its CPU its user + system time (``getrusage`` of the finished child); the table gives
each way's median and the share the pause takes off.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
from collections.abc import Sequence

from stack.config import ROOT

SETTINGS = "import os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'flashsale.settings.base'); "
# Each start as Django makes it and as the project's entry point makes it.
STARTS: dict[str, dict[str, list[str]]] = {
    "an app instance": {
        "collected": ["-c", SETTINGS + "import django; django.setup(set_prefix=False); "
                      "from orders.wsgi import PurchaseWSGIHandler; PurchaseWSGIHandler()"],
        "paused": ["-c", "import flashsale.wsgi"],
    },
    "a management command": {
        "collected": ["-c", SETTINGS + "from django.core.management import execute_from_command_line; "
                      "execute_from_command_line(['manage.py', 'expire_orders', '--help'])"],
        "paused": ["manage.py", "expire_orders", "--help"],
    },
}
WAYS = ("collected", "paused")


def cpu_of(arguments: Sequence[str]) -> float:
    """The user + system seconds of one ``python arguments`` run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, *arguments], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(runs: int) -> dict[str, dict[str, list[float]]]:
    """Each start's CPU seconds, each way, ``runs`` times, the ways taking turns."""
    seconds: dict[str, dict[str, list[float]]] = {start: {way: [] for way in WAYS} for start in STARTS}
    for _ in range(runs):
        for start, ways in STARTS.items():
            for way in WAYS:
                seconds[start][way].append(cpu_of(ways[way]))
    return seconds


def table(seconds: dict[str, dict[str, list[float]]]) -> list[str]:
    rows = ["| start | collected, CPU ms | paused, CPU ms | taken off |", "|---|---:|---:|---:|"]
    for start, ways in seconds.items():
        collected, paused = (statistics.median(ways[way]) for way in WAYS)
        rows.append(f"| {start} | {collected * 1000:.0f} | {paused * 1000:.0f} "
                    f"| {1 - paused / collected:.0%} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="starts of each kind, each way (default 15)")
    args = parser.parse_args(argv)
    seconds = measure(args.runs)
    print(f"Medians of {args.runs} starts each way (python -m benchmarks.start_cost --runs {args.runs}):\n")
    print("\n".join(table(seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
