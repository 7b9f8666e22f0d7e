"""``manage.py run_races`` as it runs beside the apps: its loop's heartbeat, between
races and through one."""

import time

import pytest

from common.testing import alive_file_touches
from races import services
from races.runner import RaceRun

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_waiting_runner_touches_its_alive_file_at_every_turn(tmp_path, monkeypatch):
    """Its liveness probe reads the file's age: each turn of the loop (a wait of a
    second at most on the queue) touches it, so a loop that stops turning is seen,
    though the metrics thread still answers."""
    touched = alive_file_touches("run_races", tmp_path / "alive", monkeypatch)
    assert len(touched) == 3, touched  # a file touched again and again, as the loop turned


def test_a_race_beats_at_every_tick_so_a_long_race_keeps_its_runner_alive(live_server, settings):
    """A race holds the runner's loop for as long as it lasts: each tick (writing the
    race down) beats instead, or a race longer than the probe's two minutes would have
    its runner killed."""
    settings.FLASHSALE_SECTION_DELAY_MS = 50  # a race of a second or so: several ticks
    queued = services.race_start(strategies=["atomic"], stock=10, buyers=40, concurrency=2)
    beats: list[float] = []
    run = RaceRun(services.race_take(race_id=queued["id"]), target=live_server.url,
                  beat=lambda: beats.append(time.monotonic()))
    began = time.monotonic()
    finished = run.run()
    lasted = time.monotonic() - began
    assert finished["status"] == "finished", finished
    # A beat each tick (TICK_S) while the buyers ran, the last no later than a tick
    # before the end.
    assert len(beats) >= 3 and lasted >= 0.6, (len(beats), lasted)
    assert max(b - a for a, b in zip([began, *beats], beats, strict=False)) < 1.0, beats
