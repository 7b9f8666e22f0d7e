"""make test-slow's stand-in (stack.standin) sets the run's CPU quota from the ping
rate wrk gets under it."""

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stack import standin
from stack.cpuquota import cpu_quota
from stack.standin import FEWEST_SHARE, StandInError, calibrate, next_share, parse_rate, pings

WRK_OUT = """Running 5s test @ http://127.0.0.1:8080/api/ping
  2 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     6.57ms    7.08ms 120.54ms   90.78%
    Req/Sec     1.47k   210.33     1.90k    71.00%
  14652 requests in 5.00s, 2.91MB read
Requests/sec:   2930.69
Transfer/sec:    595.31KB
"""


def test_the_rate_is_wrks_requests_a_second_and_none_where_it_printed_none():
    assert parse_rate(WRK_OUT) == 2930.69
    assert parse_rate("unable to connect to 127.0.0.1:9 Connection refused\n") == 0.0


def test_the_next_share_scales_with_the_rate_and_stays_within_the_machine():
    assert next_share(0.5, 2600, 1300) == pytest.approx(0.25)
    assert next_share(0.5, 650, 1300) == pytest.approx(1.0)
    assert next_share(0.8, 650, 1300) == 1.0  # all of the machine is slower than the aim
    assert next_share(0.1, 1_000_000, 1300) == FEWEST_SHARE


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.system  # wrk, and a cgroup of the kernel's made as root
def test_a_server_under_the_quota_is_brought_to_the_aimed_rate(tmp_path: Path):
    """A one-thread HTTP server and wrk in the group: the aim is half of what they get
    with the whole machine, so the share must come down to about half, and the rate
    with it."""
    (tmp_path / "ping").write_text("{}")
    port = _free_port()
    url = f"http://127.0.0.1:{port}/ping"
    with cpu_quota(1.0, name="flashsale-standin-test") as group:
        serve = [sys.executable, "-m", "http.server", "-b", "127.0.0.1", "-d", str(tmp_path), str(port)]
        server = subprocess.Popen(serve, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    free = pings(url, 1)
                    break
                except StandInError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            calibration = calibrate(group, url, 1.0, free / 2, seconds=1)
        finally:
            server.kill()
            server.wait()
    first_share, first = calibration.measured[0]
    assert first_share == 1.0
    assert calibration.share < 0.9, calibration
    # Nearer the aim than at the start, where it got about twice the aim.
    assert abs(calibration.pings - free / 2) < abs(first - free / 2), calibration
    assert str(calibration).startswith("the stand-in: "), calibration


@pytest.mark.system  # wrk
def test_wrk_that_reaches_nothing_is_an_error_not_a_rate():
    with pytest.raises(StandInError, match="could not measure"):
        pings(f"http://127.0.0.1:{_free_port()}/", 1)


@pytest.mark.system  # wrk
def test_the_command_names_the_stack_it_could_not_reach(monkeypatch, capsys):
    monkeypatch.setenv("NGINX_PORT", str(_free_port()))
    assert standin.main() == 1
    assert "is the stack up (make up)?" in capsys.readouterr().err
