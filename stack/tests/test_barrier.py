"""A switch away from the gate holds purchases only once ``manage.py gate_leave`` waits
for its cue, and lifts its barrier on the command's answer, not on the process's end:
neither Django's start nor Python's teardown holds a purchase."""

import subprocess
import sys

import pytest

from stack.control import HANDED_OVER, WAITING, StackError, _Barrier

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


def test_the_barrier_is_ready_once_the_command_waits_for_its_cue_and_reads_its_answer_after(tmp_path):
    leave = _leave(f"Django starting\n{WAITING} {tmp_path / 'cue'}\n"
                   f"{HANDED_OVER} sku-1 (1 in 0.01 s, after 0.50 s waiting for its cue)")
    try:
        barrier = _Barrier(None, leave, tmp_path / "cue")  # type: ignore[arg-type]  # ready() reads no config
        assert not barrier.waiting
        barrier.ready()
        assert barrier.waiting and leave.poll() is None
        assert _Barrier._handed_over(leave) == "1 in 0.01 s, after 0.50 s waiting for its cue"
    finally:
        leave.communicate("", timeout=30)


def test_a_command_that_ends_before_it_waits_for_its_cue_fails_the_switch_before_any_hold(tmp_path):
    leave = _leave("django.db.utils.OperationalError: (2002, ...)", status=1)
    leave.stdin.close()
    with pytest.raises(StackError, match=r"status 1\):\ndjango.db.utils.OperationalError"):
        _Barrier(None, leave, tmp_path / "cue").ready()  # type: ignore[arg-type]
