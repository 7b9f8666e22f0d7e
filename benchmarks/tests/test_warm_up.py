"""The wrk benchmarks' warm-up: as long as a row, at most 2 s, unless ``--warm-up``
says otherwise; 0 runs none (what the suite asks, since its runs check a command and
not its figures)."""

import argparse

import pytest

from benchmarks import gate
from benchmarks.gate import add_warm_up, warm_up, warm_up_s


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=6)
    add_warm_up(parser)
    return parser.parse_args(argv)


def test_the_warm_up_is_as_long_as_a_row_at_most_two_seconds_unless_given():
    assert warm_up_s(parsed()) == 2.0
    assert warm_up_s(parsed("--seconds", "1")) == 1.0
    assert warm_up_s(parsed("--warm-up", "3")) == 3.0
    assert warm_up_s(parsed("--warm-up", "0")) == 0.0


@pytest.mark.parametrize("wrong", ["-1", "nan", "soon"])
def test_a_warm_up_that_is_no_number_of_seconds_is_refused(wrong, capsys):
    with pytest.raises(SystemExit):
        parsed("--warm-up", wrong)
    assert "--warm-up" in capsys.readouterr().err


def test_a_warm_up_of_no_seconds_runs_no_wrk(monkeypatch):
    ran = []
    monkeypatch.setattr(gate, "wrk", lambda label, url, **kwargs: ran.append((label, url, kwargs["seconds"])))
    warm_up(parsed("--warm-up", "0"), "http://x/", seconds=6, connections=8)
    assert ran == []
    warm_up(parsed("--seconds", "1"), "http://x/", seconds=1, connections=8)
    assert ran == [("warm-up", "http://x/", 1)]
    warm_up(parsed(), "http://x/", seconds=6, connections=8)  # the measured run's 6 s, shortened
    assert ran[-1] == ("warm-up", "http://x/", 2.0)
