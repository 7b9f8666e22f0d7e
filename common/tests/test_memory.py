"""The process memory's contract: bounded, time-limited from before the read,
cleared by a setting change and by the tests' hook."""

import time

from django.test import override_settings

from common.memory import ProcessMemory, forget_everything


def memory(seconds=60.0, size=3) -> ProcessMemory:
    return ProcessMemory("numbers", seconds=lambda: seconds, size=size)


def test_an_entry_lasts_its_seconds_from_before_the_read():
    m = memory()
    m.put("a", 1)
    assert m.get("a") == 1
    m.put("b", 2, since=time.monotonic() - 61)  # read a minute ago: over already
    assert m.get("b") is None and m.last("b") == 2
    m.put("c", 3, seconds=0)
    assert m.get("c") is None


def test_a_full_memory_drops_its_oldest_entry():
    m = memory(size=3)
    for n, key in enumerate("abcd"):
        m.put(key, n)
    assert len(m) == 3 and m.last("a") is None and m.get("d") == 3
    m.put("b", 9)  # a re-put is the newest: "c" goes next
    m.put("e", 4)
    assert m.last("c") is None and m.get("b") == 9


def test_a_setting_change_and_the_hook_clear_every_memory():
    first, second = memory(), memory()
    first.put("a", 1)
    second.put("a", 2)
    with override_settings(FLASHSALE_INSTANCE="elsewhere"):
        assert first.get("a") is None and second.get("a") is None
    first.put("a", 1)
    forget_everything()
    assert first.last("a") is None
