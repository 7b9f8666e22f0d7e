"""The waiting room's benchmark runs against the real stack and reports the gate's
hot purchase without a room and with one (that both rows' purchases are answered 201
is ``test_purchase_cpu``'s), and its cost over the apps' CPU an answer under wrk."""

import subprocess
import sys

from stack.config import ROOT


def test_the_room_cost_reports_the_gates_row_with_and_without_a_room(stack_config):
    result = subprocess.run([sys.executable, "-m", "benchmarks.room_cost", "--rounds", "2",
                             "--requests", "30", "--wrk-rounds", "1", "--seconds", "1",
                             "--connections", "4", "--warm-up", "0"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [row] = [[c.strip().strip("*") for c in line.split("|")[1:-1]] for line in result.stdout.splitlines()
             if line.startswith("| gate |")]
    without, with_room, added, ratio = (float(cell.replace(",", "")) for cell in row[1:5])
    assert without > 0 and with_room > 0
    assert abs(added - (with_room - without)) <= 1  # each printed to the µs
    assert abs(ratio - with_room / without) < 0.02
    assert len(row[5].split(", ")) == 2  # each run's ratio
    [loaded] = [[c.strip().strip("*") for c in line.split("|")[1:-1]] for line in result.stdout.splitlines()
                if line.startswith("| gate, hot |")]
    answers, apps, stack, cost = loaded[1:]
    assert float(apps.replace(",", "")) > 0 and float(stack.replace(",", "")) >= float(apps.replace(",", ""))
    assert abs(float(cost.rstrip("%")) / 100 - added / float(apps.replace(",", ""))) < 0.002
