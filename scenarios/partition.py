"""A network link that can be partitioned on cue: a TCP relay a replica connects
through to reach its master (scenario S10).

While the link is held, what the master sends never arrives: it is read and
dropped, as by a partition that does not heal before the failover. The other
direction (the replica's acknowledgements) keeps flowing, unless the link drops
``both_ways``; ``release`` heals it.
"""

from __future__ import annotations

import socket
import threading


class Link:
    def __init__(self, target_port: int, *, both_ways: bool = False):
        self.target_port = target_port
        self.both_ways = both_ways
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._held = threading.Event()
        self._closed = False
        self._sockets: list[socket.socket] = [self._listener]
        self.dropped = 0  # bytes from the master lost while held
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self) -> None:
        """Partition: from now on nothing from the master reaches the replica."""
        self._held.set()

    def release(self) -> None:
        self._held.clear()

    def close(self) -> None:
        self._closed = True
        for s in self._sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def admit(self) -> bool:
        """Whether a connection that just came is passed on (else closed at once)."""
        return True

    def _accept(self) -> None:
        while not self._closed:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            if not self.admit():
                downstream.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self._sockets += [downstream, upstream]
            threading.Thread(target=self._pump, args=(upstream, downstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(downstream, upstream, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, from_master: bool) -> None:
        try:
            while data := source.recv(65536):
                if (from_master or self.both_ways) and self._held.is_set():
                    self.dropped += len(data)
                    continue
                target.sendall(data)
        except OSError:
            pass
