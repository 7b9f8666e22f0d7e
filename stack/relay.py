"""A TCP relay: connections to a listening address are passed on, byte for byte, to
a target (a TCP address or a Unix socket). On a test host (``stack.hosts``), it
gives a server of the stack an address of its own on the hosts' network: MariaDB
listens on loopback and its Unix socket only, so the host ``db`` relays
``<db address>:3310`` to that socket, and a partition of the link to ``db`` cuts
the app's connections to the real MariaDB.

    python -m stack.relay 10.200.7.2:3310 unix:/path/mysqld.sock
"""

from __future__ import annotations

import socket
import sys
import threading


def _connect(target: str) -> socket.socket:
    if target.startswith("unix:"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(target.removeprefix("unix:"))
        return s
    host, port = target.rsplit(":", 1)
    return socket.create_connection((host, int(port)))


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        # One side done: close both, as a TCP peer that went away would.
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def serve(listen: str, target: str) -> None:
    host, port = listen.rsplit(":", 1)
    server = socket.create_server((host, int(port)), backlog=512)
    while True:
        client, _ = server.accept()
        try:
            upstream = _connect(target)
        except OSError:
            client.close()
            continue
        for s in (client, upstream):
            if s.family != socket.AF_UNIX:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    serve(sys.argv[1], sys.argv[2])
