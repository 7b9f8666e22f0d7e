"""A wall clock of one process that a nemesis steps forward, as an NTP step or an
operator's ``date -s`` would (article 003: Redis expires a lease by its own wall clock,
so a clock that jumps ends the lease early). The process runs under Debian's
libfaketime, which reads the clock's offset from a file on every call; only the
wall clock moves, the monotonic one runs on, as a real step leaves it.

Debian's redis-server allocates with jemalloc, which reads the clock while
libfaketime is still setting itself up, and libfaketime cannot recover from that
(wolfcw/libfaketime#130). glibc's malloc-debug library, preloaded first, hands the
allocation calls back to glibc's own allocator, and Redis starts.
"""

from __future__ import annotations

import glob
from pathlib import Path


class ClockError(RuntimeError):
    """libfaketime (Debian's libfaketime package) or glibc's malloc-debug library is missing."""


def _library(pattern: str, package: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/*/{pattern}") + glob.glob(f"/lib/*/{pattern}"))
    if not found:
        raise ClockError(f"{pattern} not found: install Debian's {package}")
    return found[0]


class SteppedClock:
    """The offset file one process's wall clock reads; ``step`` moves it forward."""

    def __init__(self, directory: Path):
        self.file = Path(directory) / "clock-offset"
        self.offset = 0.0
        self._write()

    def environment(self) -> dict[str, str]:
        """What the process's environment needs to run on this clock."""
        return {
            "LD_PRELOAD": " ".join((_library("libc_malloc_debug.so.0", "libc6"),
                                    _library("faketime/libfaketime.so.1", "libfaketime"))),
            "FAKETIME_TIMESTAMP_FILE": str(self.file),
            "FAKETIME_NO_CACHE": "1",  # read on every call: a step lands at once
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }

    def step(self, seconds: float) -> None:
        """Jump the wall clock forward by ``seconds`` (it stays ahead: nothing steps it back)."""
        if seconds <= 0:
            raise ValueError("a step is forward")
        self.offset += seconds
        self._write()

    def _write(self) -> None:
        # Written whole and renamed over, so a reader never sees half an offset.
        partial = self.file.with_suffix(".partial")
        partial.write_text(f"{self.offset:+g}\n")
        partial.replace(self.file)
