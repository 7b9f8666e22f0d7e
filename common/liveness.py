"""A long-running process's heartbeat: a file it touches each time its loop goes
round, which a liveness probe reads (Kubernetes: ``find FILE -mmin -2``). A process
whose loop is stuck stops touching it, though its threads may still answer."""

from __future__ import annotations

import os
from pathlib import Path


def heartbeat(path: Path | None) -> None:
    """Mark ``path`` as touched now (None: nothing to mark): the write loop went round."""
    if path is None:
        return
    try:
        os.utime(path)
    except FileNotFoundError:
        path.touch()
