"""The servers' benchmark runs every row under each server on the real stack, in
alternating order, and puts the stack back as it was (the figures are its business)."""

import argparse
import subprocess
import sys

import psutil
import pytest

from benchmarks.gate import Run
from benchmarks.servers import ALONE, ROWS, _against_alone, _rows, _shape, _shapes, alternating
from flashsale.serve import SERVERS
from stack.config import ROOT
from stack.supervisor import Supervisor


def test_the_servers_take_turns_first():
    assert alternating(3) == [*SERVERS, *SERVERS[::-1], *SERVERS]


def _run(rate: float, cpu: float) -> Run:
    return Run("row", rate, 1.0, 2.0, {201: 1}, {"apps": cpu})


def test_the_scripts_together_are_compared_with_the_first_servers_alone_round_by_round():
    first, second = SERVERS
    runs = {first: [{"gate, hot": _run(1100, 900), ALONE: _run(1000, 1000)},
                    {"gate, hot": _run(600, 900), ALONE: _run(500, 1000)}],
            second: [{"gate, hot": _run(1600, 600), ALONE: _run(1400, 700)},
                     {"gate, hot": _run(900, 500), ALONE: _run(800, 700)}]}
    line = _against_alone(runs)
    # Medians 850 and 1,250 over 750; rounds 1.1 and 1.2, 1.6 and 1.8; CPU 1,000 over 900, 550.
    assert f"{first} with them together **1.13×** (round by round 1.10, 1.20: median 1.15; " \
           f"CPU an answer 1.11×)" in line
    assert f"{second} with them together **1.67×** (round by round 1.60, 1.80: median 1.70; " \
           f"CPU an answer 1.82×)" in line


def test_a_row_is_named_by_its_beginning():
    assert _rows("gate") == ("gate, hot", "gate, hot, scripts alone")
    assert _rows("gate, hot, s") == ("gate, hot, scripts alone",)
    assert _rows("p") == ("ping", "product, app1")
    for wrong in ("", "nothing", "hot"):
        with pytest.raises(argparse.ArgumentTypeError):
            _rows(wrong)


def test_a_shape_is_workers_x_threads_for_every_server_or_one():
    assert _shape("2x16") == (None, (2, 16))
    assert _shape("granian=1x32") == ("granian", (1, 32))
    for wrong in ("2", "0x8", "2x", "x8", "2*8", "-1x4", "uwsgi=2x8", "=2x8", "granian=", "granian=2"):
        with pytest.raises(argparse.ArgumentTypeError):
            _shape(wrong)


def test_each_server_runs_in_the_stacks_shape_unless_one_is_given_for_it():
    stack = (2, 8)
    assert _shapes(None, stack) == {"gunicorn": (2, 8), "granian": (2, 8)}
    assert _shapes([_shape("2x16")], stack) == {"gunicorn": (2, 16), "granian": (2, 16)}
    given = [_shape("2x16"), _shape("granian=1x32")]
    assert _shapes(given, stack) == {"gunicorn": (2, 16), "granian": (1, 32)}


# Past the suite's 300 s: the run's own timeout below bounds a hang, not the machine's speed.
@pytest.mark.timeout(660)
def test_every_row_runs_under_each_server_and_the_stack_is_put_back(stack_apps, stack_config):
    stack_apps()  # as started, whatever the test before asked: the server put back is the stack's own
    before = Supervisor(stack_config).info("app1")["pid"]
    command = [sys.executable, "-m", "benchmarks.servers", "--rounds", "1", "--seconds", "1",
               "--connections", "2", "--requests", "20", "--warm-up", "0"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    table = [line.split("|") for line in result.stdout.splitlines() if line.startswith("| ")]
    rows = [cells for cells in table if cells[1].strip() in ROWS]
    by_role = [(cells[1].strip(), cells[2].strip()) for cells in rows if cells[2].strip() in SERVERS]
    assert by_role == [(row, server) for row in ROWS for server in SERVERS]
    compared = [cells for cells in rows if cells[2].strip() not in SERVERS]
    assert [cells[1].strip() for cells in compared] == list(ROWS) * 3  # the rates, each round's, the split
    assert "granian with them together" in result.stdout  # the gate's scripts together over alone
    compared = compared[:len(ROWS)]
    for cells in compared:  # answers/s under each server
        assert float(cells[2].replace(",", "")) > 0 and float(cells[3].replace(",", "")) > 0
    info = Supervisor(stack_config).info("app1")
    assert info["statename"] == "RUNNING" and info["pid"] != before  # restarted, and back
    assert stack_config.server in " ".join(psutil.Process(info["pid"]).cmdline())
