"""The machine's speed at the hour a figure is taken: the CPU one 10-million-step
Python list comprehension costs, in one process.

The machines this project runs on are shared, and the same suite's CPU moves with
the hour by more than most cuts to it, so each measured run names the yardstick
beside its figure (``python -m stack test`` prints it before and after the suite).
It is one core's speed: a CPU quota of half the cores (``make test-slow``) leaves it
as it is, and burners beside it move it.

    python -m stack.yardstick
"""

from __future__ import annotations

import time

STEPS = 10_000_000


def loop_seconds() -> float:
    """CPU seconds of ``[0 for _ in range(STEPS)]`` in this process."""
    started = time.process_time()
    [0 for _ in range(STEPS)]  # noqa: B018 (the work measured)
    return time.process_time() - started


def main() -> None:
    print(f"a {STEPS:,}-step list comprehension: {loop_seconds():.2f} s of CPU")


if __name__ == "__main__":
    main()
