"""Where a machine sits between the two kinds the suite's time aims are set for, by the
yardstick they were measured with: the ``/api/ping`` answers a second that wrk gets
from a stack. The slower kind got about 1.3k of them, the faster kind twice that.

``python -m stack.standin`` reads the rate from the stack ``make up`` started. It
places the machine at the hour it is read: the machine is shared, and its speed moves
from hour to hour.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

from .config import StackConfig
from .servers import StackError

# The slower kind of machine: wrk got this many ping answers a second from its stack.
SLOWER_KIND_PINGS = 1300
# A thread a core, eight connections each.
WRK = ("wrk", "-t2", "-c16")
MEASURE_S, WARM_S = 5, 2


class StandInError(StackError):
    """wrk did not run, or got no answers from the stack."""


def pings(url: str, seconds: int = MEASURE_S) -> float:
    """The answers a second wrk gets from ``url`` in ``seconds`` (whole: wrk reads no fraction)."""
    try:
        out = subprocess.run([*WRK, f"-d{seconds}s", url], capture_output=True, text=True, check=True,
                             timeout=seconds + 30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise StandInError(f"wrk could not measure {url}: {e}") from e
    rate = parse_rate(out)
    if not rate:
        raise StandInError(f"wrk got no answers from {url}:\n{out}")
    return rate


def parse_rate(out: str) -> float:
    """wrk's ``Requests/sec``, 0 where its output has none."""
    found = re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M)
    return float(found.group(1)) if found else 0.0


def main() -> int:
    if shutil.which(WRK[0]) is None:  # else the error would say the stack is down
        print("[standin] wrk is not installed (make install-test installs it)", file=sys.stderr)
        return 1
    url = StackConfig.from_env().base_url + "/api/ping"
    try:
        pings(url, WARM_S)  # the first answers of a stack just started cost more
        rate = pings(url, MEASURE_S)
    except StandInError as e:
        print(f"[standin] {e}\n[standin] is the stack up (make up)?", file=sys.stderr)
        return 1
    print(f"[standin] wrk got {rate:,.0f} /api/ping answers a second from {url}: the slower kind "
          f"gets {SLOWER_KIND_PINGS:,}, the faster kind {2 * SLOWER_KIND_PINGS:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
