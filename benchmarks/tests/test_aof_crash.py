"""The crash benchmark's kill: a Redis of its own, killed mid-writes and started again
from its AOF; under ``always`` it keeps every write it answered."""

import random

import pytest

from benchmarks.aof_crash import kill_once, report

pytestmark = pytest.mark.server  # it starts a Redis of its own


def test_a_redis_under_always_keeps_every_write_it_answered_through_a_kill(tmp_path, capsys):
    kills = [kill_once("always", tmp_path / str(n), random.Random(n)) for n in range(2)]
    for kill in kills:
        assert kill.answered > 0 and not kill.during_fsync
        assert kill.kept >= kill.answered and kill.taken_back == 0, kill
    report("the test", kills)
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| always"))
    assert row.split("|")[2:5] == [" 2 ", " 0 ", " 0 "]
