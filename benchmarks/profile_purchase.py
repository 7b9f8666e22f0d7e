"""Where a purchase's time goes, sampled by py-spy from a live instance under load:

    python -m benchmarks.profile_purchase [--strategy atomic] [--sku-spread 64]
                                          [--users 64] [--seconds 10] [--out docs/profile]
    (make profile: installs py-spy, starts the stack, runs this)

Restarts the app instances with the strategy (race delay 0), runs Locust against
nginx for ``seconds`` with every request buying (``--sku-spread 1``: one hot product;
more: the buyers spread, so nobody waits on a lock), and meanwhile records both
gunicorn workers of ``app1`` with py-spy: one as a flame graph (SVG), the other as
collapsed stacks, from which it writes the top entries by CPU share. The instances
are put back as they were.

Writes ``<out>/<strategy>-flame.svg`` and ``<out>/<strategy>-top.md`` (the command,
the load, and two tables: by inclusive share, and by self share).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

from loadtest.buyers import buyers_file
from loadtest.client import FlashsaleClient
from loadtest.compare import BUYER_PREFIX, run_locust
from loadtest.figures import run_figures
from stack.config import BIN, ROOT, StackConfig
from stack.control import apps_as_needed
from stack.servers import StackError
from stack.supervisor import Supervisor

STOCK = 1_000_000  # more than any window sells: every request buys


def workers_of(config: StackConfig, name: str) -> list[int]:
    """The gunicorn worker PIDs of instance ``name`` (children of its master)."""
    master = Supervisor(config).info(name)["pid"]
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    if not children:
        raise StackError(f"{name} (pid {master}) has no workers")
    return [int(pid) for pid in children]


def record(pid: int, seconds: float, out: Path, fmt: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "py-spy"), "record", "--pid", str(pid), "--duration", str(int(seconds)),
         "--rate", "200", "--format", fmt, "--output", str(out), "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _frame(frame: str) -> str:
    """``order_create (orders/services.py:178)`` → ``orders/services.py:order_create``."""
    name, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0]
    for marker in ("site-packages/", str(ROOT) + "/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{path}:{name.strip()}"


# Frames every sample passes through: the thread pool and gunicorn's loop say nothing.
_PLUMBING = ("threading.py:", "concurrent/futures/", "gunicorn/workers/")


def top_entries(stacks: str, limit: int = 25) -> tuple[int, list[tuple[str, float]], list[tuple[str, float]]]:
    """From py-spy's collapsed stacks (``frame;frame;... count`` per line): the sample
    count, and the top functions by inclusive and by self share of the samples."""
    inclusive, own, total = Counter(), Counter(), 0
    for line in stacks.splitlines():
        frames, _, count = line.rpartition(" ")
        if not frames or not count.isdigit():
            continue
        n = int(count)
        total += n
        names = [_frame(f) for f in frames.split(";")[1:]]  # the first frame is the thread
        for name in set(names):
            if not name.startswith(_PLUMBING):
                inclusive[name] += n
        if names:
            own[names[-1]] += n
    share = lambda counter: [(name, n / total) for name, n in counter.most_common(limit)]  # noqa: E731
    return total, share(inclusive), share(own)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strategy", default="atomic")
    parser.add_argument("--sku-spread", type=int, default=64,
                        help="products the buyers spread over (1: one hot product)")
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--out", default=str(ROOT / "docs" / "profile"))
    args = parser.parse_args(argv)
    given = argv if argv is not None else sys.argv[1:]
    command = "python -m benchmarks.profile_purchase " + shlex.join(given)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = StackConfig.from_env()
    base = f"profile-{args.strategy}"
    products = [base] if args.sku_spread == 1 else [f"{base}-{k}" for k in range(args.sku_spread)]

    with apps_as_needed(config) as use:
        running = use(strategy=args.strategy, section_delay_ms=0.0)
        client = FlashsaleClient.for_stack(running)
        for product in products:
            client.reset(product, STOCK)
        flame = out / f"{args.strategy}-flame.svg"
        answers: list = []
        with tempfile.TemporaryDirectory() as scratch:
            stacks = Path(scratch) / "stacks.txt"
            tokens = (buyers_file(running, Path(scratch) / "buyers.tsv", prefix=BUYER_PREFIX,
                                  count=args.users)
                      if running.buyer_auth else None)
            load = threading.Thread(target=lambda: answers.extend(run_locust(
                base_url=running.base_url, out=Path(scratch) / "load", sku=base, endpoint="purchase",
                users=args.users, attempts=STOCK, retry_share=0, seconds=args.seconds + 2,
                skus=args.sku_spread, tokens=tokens).answers))
            load.start()
            # Sample the steady state: after the users have started, before the window closes.
            threading.Event().wait(1.0)
            first, second = workers_of(running, "app1")[:2]
            spies = [record(first, args.seconds, flame, "flamegraph"),
                     record(second, args.seconds, stacks, "raw")]
            for spy in spies:
                _, err = spy.communicate()
                if spy.returncode != 0:
                    raise StackError(f"py-spy failed: {err.strip()[-500:]}")
            load.join()
            total, by_inclusive, by_self = top_entries(stacks.read_text())
    figures = run_figures(answers)
    load_line = (f"{args.users} Locust users, every request buys, spread over {args.sku_spread} "
                 f"product(s); {figures.created} orders in {figures.seconds:.1f} s "
                 f"({figures.created / figures.seconds:,.0f} orders/s); strategy {args.strategy}; "
                 f"{config.instances} instances x {config.workers} workers x {config.threads} threads; "
                 f"py-spy at 200 Hz on one worker of app1 for {args.seconds:g} s, {total:,} samples "
                 f"(threads py-spy sees idle are left out; a thread waiting inside a MySQL or "
                 f"Redis call still counts: the round trips show)")

    def table(rows):
        return "\n".join(["| share | function |", "|---:|---|"]
                         + [f"| {share:.1%} | `{name}` |" for name, share in rows])

    report = out / f"{args.strategy}-top.md"
    report.write_text(f"# Where a purchase's CPU goes: `{args.strategy}`\n\n`{command}`\n\n{load_line}\n\n"
                      f"Flame graph: [{flame.name}]({flame.name})\n\n"
                      f"## Inclusive (the function and what it called)\n\n{table(by_inclusive)}\n\n"
                      f"## Self (the function's own code)\n\n{table(by_self[:15])}\n")
    print(report.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
