"""The stack's tests, grouped by what they ask of the app instances (stack.appgroups)."""

import pytest

from stack import appgroups, control
from stack.config import StackConfig


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("RUN_DIR", str(tmp_path / "run"))
    return StackConfig.from_env()


def test_what_a_test_asks_of_the_apps_is_what_it_changes_of_the_lanes_configuration(config):
    assert appgroups.apps_asked(config, {}) == appgroups.AS_STARTED
    # Asking for what runs already changes nothing: grouped with the tests that ask none.
    assert appgroups.apps_asked(config, {"strategy": config.strategy}) == appgroups.AS_STARTED
    asked = appgroups.apps_asked(config, {"strategy": "gate", "instances": 1})
    assert asked == '{"instances": "1", "strategy": "gate"}'


def switches(tests: list[str], asked: dict[str, str]) -> int:
    """How often the app instances restart running ``tests`` in that order."""
    wanted = [asked.get(test, appgroups.AS_STARTED) for test in tests]
    return sum(a != b for a, b in zip(wanted, wanted[1:], strict=False))


def test_the_stack_tests_run_grouped_by_what_they_ask_of_the_apps_as_started_first():
    tests = ["a", "b", "c", "d", "e", "f", "new"]
    asked = {"a": '{"strategy": "gate"}', "b": appgroups.AS_STARTED, "c": '{"strategy": "setnx"}',
             "d": '{"strategy": "gate"}', "e": appgroups.AS_STARTED, "f": '{"strategy": "setnx"}'}
    order = appgroups.apps_order(tests, asked)
    grouped = sorted(tests, key=order.__getitem__)
    # A test the record does not know yet runs with those that ask for the apps as started.
    assert grouped == ["b", "e", "new", "a", "d", "c", "f"]
    assert switches(tests, asked) == 6 and switches(grouped, asked) == 2
    # Those that read the watchers last, so that the watchers start as late as can be.
    order = appgroups.apps_order(tests, asked, last={"b", "d"})
    assert sorted(tests, key=order.__getitem__) == ["e", "new", "a", "c", "f", "b", "d"]


@pytest.mark.parametrize("put_back", [True, False])
def test_the_instances_go_back_as_started_unless_the_stack_stops_next(put_back, config, monkeypatch):
    """``apps_as_needed`` restarts only for a change, and at its end puts them back,
    unless told its stack stops next (a ``make test`` part's: stack.suite.leave_apps)."""
    restarts = []
    monkeypatch.setattr(control, "reconfigure", lambda wanted, rolling: restarts.append(wanted) or wanted)
    with control.apps_as_needed(config, rolling=False, put_back=put_back) as use:
        use()  # as started: nothing restarts
        use(strategy="gate")
        use(strategy="gate")  # what runs already
    assert restarts[:1] == [config.replace(strategy="gate")]
    assert restarts[1:] == ([config] if put_back else [])
