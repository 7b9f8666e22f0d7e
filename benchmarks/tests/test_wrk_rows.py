"""A wrk row measures answers: one that got too few (a starved stack) runs again,
twice as long, and one that never gets them says so, against a real wrk and a server
that holds its first requests."""

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchmarks import gate

# wrk is a Debian package make test installs.
pytestmark = pytest.mark.system


class NoStack:
    """The stack's CPU meter, for a server that is no stack: nothing to count."""

    def snapshot(self) -> Counter:
        return Counter()


def serving(held: int, hold_s: float) -> ThreadingHTTPServer:
    """On a free port: its first ``held`` requests answered after ``hold_s``, the rest at once."""
    seen = iter(range(10**9))
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            with lock:
                n = next(seen)
            if n < held:
                threading.Event().wait(hold_s)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_row_with_too_few_answers_runs_again_twice_as_long(capsys):
    server = serving(held=2, hold_s=1.5)  # each of the 2 connections' first request outlasts 1 s
    try:
        run = gate.wrk("held", f"http://127.0.0.1:{server.server_port}/", seconds=1, connections=2,
                       meter=NoStack())
    finally:
        server.shutdown()
        server.server_close()
    assert "held: 0 answers in 1 s, fewer than 20: again for 2 s" in capsys.readouterr().err
    assert run.requests_per_s * 2 >= gate.FEWEST_ANSWERS and run.cpu_us["apps"] == 0.0


def test_a_row_that_never_gets_its_answers_says_so(monkeypatch):
    monkeypatch.setattr(gate, "LONGEST_S", 1.0)
    server = serving(held=10**6, hold_s=5.0)
    try:
        with pytest.raises(SystemExit, match="wrk got 0 answers in 1 s, fewer than 20: the stack is not"):
            gate.wrk("never", f"http://127.0.0.1:{server.server_port}/", seconds=1, connections=2,
                     meter=NoStack())
    finally:
        server.shutdown()
        server.server_close()
