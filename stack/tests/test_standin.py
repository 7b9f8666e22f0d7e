"""python -m stack.standin reads the ping rate wrk gets from a stack."""

import pytest

from stack import standin
from stack.scratch import free_port
from stack.standin import StandInError, parse_rate, pings

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


@pytest.mark.system  # wrk
def test_wrk_that_reaches_nothing_is_an_error_not_a_rate():
    with pytest.raises(StandInError, match="could not measure"):
        pings(f"http://127.0.0.1:{free_port()}/", 1)


@pytest.mark.system  # wrk
def test_the_command_names_the_stack_it_could_not_reach(monkeypatch, capsys):
    monkeypatch.setenv("NGINX_PORT", str(free_port()))
    assert standin.main() == 1
    assert "is the stack up (make up)?" in capsys.readouterr().err


def test_without_wrk_the_command_says_to_install_it_not_that_the_stack_is_down(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # a directory with no wrk in it
    assert standin.main() == 1
    err = capsys.readouterr().err
    assert "wrk is not installed" in err and "make up" not in err


def test_the_stacks_nginx_answers_pings_at_a_rate(stack_config, monkeypatch, capsys):
    # main answers 0 only on a rate wrk measured: it raises on none.
    monkeypatch.setattr(standin, "MEASURE_S", 1)
    monkeypatch.setattr(standin, "WARM_S", 1)
    monkeypatch.setenv("NGINX_PORT", str(stack_config.nginx_port))
    assert standin.main() == 0
    assert "/api/ping answers a second from " + stack_config.base_url in capsys.readouterr().out
