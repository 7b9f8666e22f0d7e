"""The order the stack's tests run in: grouped by what they ask of the app instances
(a strategy, a server, a knob: ``stack_apps(...)``), as the last stored run recorded
it in ``.test_apps`` (``python -m stack test --store-durations`` writes it). Each
switch restarts the instances, and in the order the files list them the tests
switched back and forth."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import fields

from .config import ROOT, StackConfig

APPS_ASKED = ROOT / ".test_apps"
# What a test that asks nothing of the app instances is grouped with: as started.
AS_STARTED = "{}"


def apps_recorded() -> dict[str, str]:
    """What each test asked of the app instances, as the last stored run recorded it
    in ``APPS_ASKED`` (none, before one)."""
    return json.loads(APPS_ASKED.read_text()) if APPS_ASKED.exists() else {}


def apps_asked(base: StackConfig, changes: Mapping[str, object]) -> str:
    """What a test asked of the app instances: the fields of its lane's configuration
    it changes, as a JSON object (``AS_STARTED`` for none)."""
    wanted = base.replace(**changes)
    return json.dumps({f.name: str(getattr(wanted, f.name)) for f in fields(base)
                       if getattr(wanted, f.name) != getattr(base, f.name)}, sort_keys=True)


def apps_order(tests: Sequence[str], asked: Mapping[str, str], last: Collection[str] = ()) -> dict[str, int]:
    """Each test's place when the tests run grouped by what they ask of the app
    instances: those that ask for them as started first, then each other group where
    its first test stood; within a group, as listed. The tests in ``last`` (those that
    read the watchers) come after all the others, grouped the same way."""
    groups = list(dict.fromkeys([AS_STARTED, *(asked.get(test, AS_STARTED) for test in tests)]))
    rank = {group: i for i, group in enumerate(groups)}
    ordered = sorted(range(len(tests)),
                     key=lambda i: (tests[i] in last, rank[asked.get(tests[i], AS_STARTED)], i))
    return {tests[i]: place for place, i in enumerate(ordered)}
