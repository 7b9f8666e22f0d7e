"""The tests that drive no lane's stack, shared out by time between the lanes' beside
parts and the alone part (``stack.suite``), so that they end together.

The alone part's own tests (``exclusive``, ``own_stack``) must run there; the others
(the beside tests) may run in any of these parts, since none drives the stack it runs
beside. Split evenly between the lanes alone, they left the alone part done while the
beside parts ran on, and the suite lasts as long as its longest part. Each of these
pytest runs collects the same tests and reads the same durations (pytest-split's
file, ``--durations-path``), so each computes the same shares and keeps its own: a
pytest plugin, loaded by the root conftest.py, active when ``SHARE`` is set ("k/n":
the k-th of n shares, the last being the alone part's).
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import pytest

from .suite import SHARE

PINNED_MARKS = ("exclusive", "own_stack")  # they run in the last share: the alone part's stack


def shares(tests: Sequence[str], durations: Mapping[str, float], parts: int,
           pinned: Collection[str] = ()) -> list[list[str]]:
    """``tests`` in ``parts`` shares of about equal time by ``durations``: those in
    ``pinned`` all in the last share; the others longest first, each into the share
    with the least time so far (a test without a duration counts as their mean).
    Each share keeps the order ``tests`` came in."""
    known = [durations[test] for test in tests if test in durations]
    mean = sum(known) / len(known) if known else 1.0
    took = {test: durations.get(test, mean) for test in tests}
    share_of = dict.fromkeys((test for test in tests if test in pinned), parts - 1)
    load = [0.0] * parts
    load[-1] = sum(took[test] for test in share_of)
    free = [test for test in tests if test not in share_of]
    for test in sorted(free, key=lambda test: (-took[test], test)):
        least = min(range(parts), key=lambda k: (load[k], k))
        share_of[test] = least
        load[least] += took[test]
    return [[test for test in tests if share_of[test] == k] for k in range(parts)]


def share_asked() -> tuple[int, int] | None:
    """(k, n) from ``SHARE``; None when it is not set."""
    asked = os.environ.get(SHARE)
    if not asked:
        return None
    k, n = (int(part) for part in asked.split("/"))
    if not 1 <= k <= n:
        raise pytest.UsageError(f"{SHARE}={asked}: not the k-th of n shares")
    return k, n


@pytest.hookimpl(trylast=True)  # after -m has deselected by marks: the shares are of what is left
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    asked = share_asked()
    if asked is None:
        return
    k, n = asked
    path = Path(config.getoption("durations_path"))
    durations = json.loads(path.read_text()) if path.exists() else {}
    pinned = {item.nodeid for item in items if any(item.get_closest_marker(mark) for mark in PINNED_MARKS)}
    kept = set(shares([item.nodeid for item in items], durations, n, pinned)[k - 1])
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid not in kept])
    items[:] = [item for item in items if item.nodeid in kept]
