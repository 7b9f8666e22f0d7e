"""Which tests each part of ``make test`` runs (``stack.suite``): a pytest plugin,
loaded by the root conftest.py, active when ``POOL`` names a directory.

A part runs its own tests first, in the order given: a stack part its share of the
tests that drive its lane's stack (``SHARE``, "k/n": the k-th of n shares of about
equal time by the durations), the alone part the tests that must run there
(``exclusive``, ``own_stack``). The rest (the tests that drive no stack and fault no
shared server) are a pool that every part draws from once its own are done, a chunk
at a time: a part takes the next chunk that no part has taken, by creating that
chunk's file in ``POOL`` (``O_EXCL``: of two parts that try at once, one wins).
Split between the parts ahead of time by the last run's durations, the parts ended
minutes apart, the stack parts first, and the machine idled through the suite's last
minutes; drawn as each part comes free, they end within a chunk of each other.

A chunk is a module's tests in a row, their durations adding up to at most
``CHUNK_SECONDS`` (a longer test alone), so that a module's fixtures are set up once
a chunk; the longest chunks are drawn first, so the last drawn are short. Every part
collects the same tests and reads the same durations (pytest-split's file,
``--durations-path``), so each makes the same chunks, in the same order.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from .appgroups import AS_STARTED, apps_recorded
from .suite import POOL, SHARE

PINNED_MARKS = ("exclusive", "own_stack")  # they run in the alone part: on its stack, after nothing
CHUNK_SECONDS = 20.0


def shares(tests: Sequence[str], durations: Mapping[str, float], parts: int,
           asked: Mapping[str, str] | None = None) -> list[list[str]]:
    """``tests`` in ``parts`` shares of about equal time by ``durations``: longest
    first, each into the share with the least time so far (a test without a duration
    counts as their mean). The tests that ask the same of the app instances
    (``asked``, as ``stack.appgroups`` records it) go as one, into one share: a share
    that ran some of them would restart its instances for them too. Those that ask
    nothing go one by one. Each share keeps the order ``tests`` came in."""
    took = _took(tests, durations)
    asked = asked or {}
    units: dict[str, list[str]] = {}
    for test in tests:
        group = asked.get(test, AS_STARTED)
        units.setdefault(test if group == AS_STARTED else group, []).append(test)
    seconds = {unit: sum(took[test] for test in members) for unit, members in units.items()}
    share_of: dict[str, int] = {}
    load = [0.0] * parts
    for unit in sorted(units, key=lambda unit: (-seconds[unit], unit)):
        least = min(range(parts), key=lambda k: (load[k], k))
        share_of.update(dict.fromkeys(units[unit], least))
        load[least] += seconds[unit]
    return [[test for test in tests if share_of[test] == k] for k in range(parts)]


def chunks(tests: Sequence[str], durations: Mapping[str, float],
           most: float = CHUNK_SECONDS) -> list[list[str]]:
    """``tests`` cut into runs of one module's tests, each run's durations adding up
    to at most ``most`` (a test longer than that alone); the longest run first, runs
    of equal time in the order given."""
    took = _took(tests, durations)
    cut: list[tuple[float, list[str]]] = []  # (its seconds, its tests)
    for test in tests:
        if cut and _module(cut[-1][1][0]) == _module(test) and cut[-1][0] + took[test] <= most:
            cut[-1] = (cut[-1][0] + took[test], [*cut[-1][1], test])
        else:
            cut.append((took[test], [test]))
    return [run for _, run in sorted(cut, key=lambda run: -run[0])]


def _took(tests: Sequence[str], durations: Mapping[str, float]) -> dict[str, float]:
    """Each test's duration; one without counts as the mean of those with one."""
    known = [durations[test] for test in tests if test in durations]
    mean = sum(known) / len(known) if known else 1.0
    return {test: durations.get(test, mean) for test in tests}


def _module(test: str) -> str:
    return test.split("::", 1)[0]


def share_asked() -> tuple[int, int] | None:
    """(k, n) from ``SHARE``; None when it is not set."""
    asked = os.environ.get(SHARE)
    if not asked:
        return None
    k, n = (int(part) for part in asked.split("/"))
    if not 1 <= k <= n:
        raise pytest.UsageError(f"{SHARE}={asked}: not the k-th of n shares")
    return k, n


class Pool:
    """A part's own tests, then the chunks of the pool it draws."""

    def __init__(self, directory: Path, own: list[pytest.Item], pooled: list[list[pytest.Item]]):
        self.directory, self.own, self.pooled = directory, own, pooled

    def take(self, index: int) -> bool:
        """Whether this part takes the chunk: none had yet."""
        first = self.pooled[index][0].nodeid
        claim = self.directory / hashlib.sha256(first.encode()).hexdigest()[:24]
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as out:  # who took it, for whoever reads the directory
            out.write(f"{os.getpid()} {first}\n")
        return True

    def items(self) -> Iterator[pytest.Item]:
        """The tests to run, in order: drawn lazily, one test ahead of the one running."""
        yield from self.own
        for index, chunk in enumerate(self.pooled):
            if self.take(index):
                yield from chunk


_POOL = pytest.StashKey[Pool]()


@pytest.hookimpl(trylast=True)  # after -m has deselected by marks: the pool is of what is left
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    directory = os.environ.get(POOL)
    if not directory:
        return
    path = Path(config.getoption("durations_path"))
    durations = json.loads(path.read_text()) if path.exists() else {}
    own: list[pytest.Item] = []
    pooled: list[pytest.Item] = []
    for item in items:
        (own if _is_own(item) else pooled).append(item)
    if asked := share_asked():
        k, n = asked
        kept = set(shares([item.nodeid for item in own], durations, n, apps_recorded())[k - 1])
        config.hook.pytest_deselected(items=[item for item in own if item.nodeid not in kept])
        own = [item for item in own if item.nodeid in kept]
    by_id = {item.nodeid: item for item in pooled}
    cut = chunks([item.nodeid for item in pooled], durations)
    config.stash[_POOL] = Pool(Path(directory), own, [[by_id[test] for test in chunk] for chunk in cut])
    items[:] = [*own, *pooled]  # all collected; those another part draws are not run here


def _is_own(item: pytest.Item) -> bool:
    """Whether a part runs it itself: it drives a stack, or must run in the alone part."""
    return bool(item.get_closest_marker("stack") or any(item.get_closest_marker(m) for m in PINNED_MARKS))


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """pytest's own loop (``_pytest.main``), over the tests the pool gives: the next
    is drawn before one runs, since its teardown depends on what follows it."""
    pool = session.config.stash.get(_POOL, None)
    if pool is None:
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        raise session.Interrupted(f"{session.testsfailed} errors during collection")
    if session.config.option.collectonly:
        return True
    tests = pool.items()
    item = next(tests, None)
    while item is not None:
        following = next(tests, None)
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=following)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
        item = following
    return True
