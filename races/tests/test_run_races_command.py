"""``manage.py run_races`` as it runs beside the apps: its loop's heartbeat, between
races and through one."""

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
    events: list[str] = []

    class Watched(RaceRun):
        def _write_down(self) -> None:  # what each tick does, then it beats
            super()._write_down()
            events.append("write")

    run = Watched(services.race_take(race_id=queued["id"]), target=live_server.url,
                  beat=lambda: events.append("beat"))
    finished = run.run()
    assert finished["status"] == "finished", finished
    # Every tick (TICK_S apart while the buyers run) wrote the race down and beat, in
    # that order, several times; the last write (the race's end) needs no beat. Counted,
    # not timed: how long a tick's write takes is the machine's.
    beats = events.count("beat")
    through_last_beat = events[:len(events) - events[::-1].index("beat")]
    assert beats >= 3 and through_last_beat == ["write", "beat"] * beats, events
