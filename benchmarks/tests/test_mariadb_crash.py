"""The MariaDB crash benchmark's kills: a MariaDB of its own under the stack's InnoDB
I/O, SIGKILLed mid-purchases and started again, comes back whole."""

import random

import pytest

from benchmarks.mariadb_crash import CONFIGURATIONS, measure, report

pytestmark = pytest.mark.server  # it starts a MariaDB of its own

STACKS = next(iter(CONFIGURATIONS))


def test_a_mariadb_under_the_stacks_io_comes_back_whole_from_each_kill(tmp_path, capsys):
    tally = measure(STACKS, 2, tmp_path, random.Random(0))
    assert tally.kills == 2 and tally.answered > 0
    assert (tally.refused, tally.corruption_reported, tally.stopped_after) == (0, 0, 0), tally.errors
    assert (tally.lost_commits, tally.ledger_mismatches) == (0, 0), tally
    report("the test", [tally])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {STACKS}"))
    assert row.split("|")[2:8] == [" 2 ", " 0 ", " 0 ", " 0 ", " 0 ", " 0 "]
