"""How slow ``make test-slow``'s stand-in is, measured the way the slower kind of
machine was: the ``/api/ping`` answers a second that wrk gets from a stack, wrk
itself under the run's CPU quota as on that machine it shares its cores. The slower
kind got about 1.3k of them, the faster kind twice that.

A fixed share of this machine is not a fixed machine: the machine is shared, and its
speed moves from hour to hour, so half of it is slower than the slower kind in its
slow hours and faster in its fast ones. ``calibrate`` sets the quota from what wrk
gets, so a run of ``make test-slow`` stands in for the same machine whatever the
hour, and says how near it came.

``python -m stack.standin`` reads the rate from the stack ``make up`` started, so a
machine can be placed between the two kinds.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .config import StackConfig
from .cpuquota import reshare
from .servers import StackError

# The slower kind of machine: wrk got this many ping answers a second from its stack.
SLOWER_KIND_PINGS = 1300
# A thread a core, eight connections each.
WRK = ("wrk", "-t2", "-c16")
MEASURE_S, WARM_S = 5, 2
# A rate this near the aim is the stand-in; the ping rate follows the share closely,
# so one correction mostly gets there.
NEAR = 0.05
ROUNDS = 3
FEWEST_SHARE = 0.05


class StandInError(StackError):
    """wrk did not run, or got no answers from the stack."""


@dataclass(frozen=True)
class Calibration:
    aim: float  # pings a second
    measured: list[tuple[float, float]]  # (share, pings a second), in the order tried

    @property
    def share(self) -> float:
        return self.measured[-1][0]

    @property
    def pings(self) -> float:
        return self.measured[-1][1]

    def __str__(self) -> str:
        tried = ", ".join(f"{pings:,.0f} at {share:.2f}" for share, pings in self.measured)
        return (f"the stand-in: {self.pings:,.0f} ping answers a second at {self.share:.2f} of the cores "
                f"(the slower kind's {self.aim:,.0f}; tried {tried})")


def pings(url: str, seconds: float = MEASURE_S) -> float:
    """The answers a second wrk gets from ``url`` in ``seconds``."""
    try:
        out = subprocess.run([*WRK, f"-d{seconds:g}s", url], capture_output=True, text=True, check=True,
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


def next_share(share: float, rate: float, aim: float) -> float:
    """The share that gets ``aim`` where ``share`` got ``rate``: the rate follows the
    share, within the machine (at most all of it, at least a sliver)."""
    return min(1.0, max(FEWEST_SHARE, share * aim / rate))


def calibrate(group: Path, url: str, share: float, aim: float = SLOWER_KIND_PINGS, *,
              seconds: float = MEASURE_S) -> Calibration:
    """Set ``group``'s quota, now ``share``, so that wrk under it gets ``aim`` answers
    a second from ``url`` (each try ``seconds`` long); what it got at each share tried."""
    pings(url, WARM_S)  # the first answers of a stack just started cost more
    measured: list[tuple[float, float]] = []
    for _ in range(ROUNDS):
        rate = pings(url, seconds)
        measured.append((share, rate))
        wanted = next_share(share, rate, aim)
        if abs(rate - aim) <= aim * NEAR or wanted == share:
            break
        share = wanted
        reshare(group, share)
    else:
        if measured[-1][0] != share:  # the last correction, measured
            measured.append((share, pings(url, seconds)))
    return Calibration(aim, measured)


def main() -> int:
    url = StackConfig.from_env().base_url + "/api/ping"
    try:
        pings(url, WARM_S)
        rate = pings(url)
    except StandInError as e:
        print(f"[standin] {e}\n[standin] is the stack up (make up)?", file=sys.stderr)
        return 1
    print(f"[standin] wrk got {rate:,.0f} /api/ping answers a second from {url}: the slower kind "
          f"gets {SLOWER_KIND_PINGS:,}, the faster kind {2 * SLOWER_KIND_PINGS:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
