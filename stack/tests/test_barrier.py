"""A switch away from the gate lifts its barrier on ``manage.py gate_leave``'s answer,
not on the process's end: what Python does after the answer holds no purchase."""

import subprocess
import sys

import pytest

from stack.control import HANDED_OVER, StackError, _Barrier

# Says its answer (or not), then waits on its stdin: alive until the test lets it go.
COMMAND = "import sys\nprint({said!r}, flush=True)\nsys.stdin.read()\nsys.exit({status})"


def _leave(said: str, status: int = 0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", COMMAND.format(said=said, status=status)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def test_the_barrier_lifts_on_the_answer_while_the_command_still_runs():
    leave = _leave(f"{HANDED_OVER} sku-1")
    try:
        _Barrier._handed_over(leave)
        assert leave.poll() is None  # answered, not ended
    finally:
        leave.communicate("", timeout=30)


def test_a_command_that_ends_without_its_answer_fails_the_switch_with_what_it_said():
    leave = _leave("the gate's sales are not handed to the database, 3 unwritten", status=1)
    leave.stdin.close()  # it ends at once after saying so
    with pytest.raises(StackError, match=r"status 1\):\nthe gate's sales are not handed"):
        _Barrier._handed_over(leave)
