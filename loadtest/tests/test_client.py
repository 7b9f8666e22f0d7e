"""The client's reset survives a kept-alive connection dropped unanswered, as nginx
drops its idle ones when it reloads."""

import json
import socket
import threading

from loadtest.client import FlashsaleClient


def test_a_reset_dropped_unanswered_is_sent_again_on_a_new_connection():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    seen = []

    def serve():
        for attempt in range(2):
            connection, _ = server.accept()
            request = connection.recv(65536)
            seen.append(request.split(b"\r\n", 1)[0])
            if attempt == 0:
                connection.close()  # no answer, as a reloading nginx's old worker
                continue
            body = json.dumps({"sku": "p", "stock": 3}).encode()
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    answer = FlashsaleClient(f"http://127.0.0.1:{port}", admin_token="t", timeout=5).reset("p", 3)
    thread.join(5)
    server.close()
    assert answer == {"sku": "p", "stock": 3}
    assert seen == [b"POST /api/admin/products/p/reset HTTP/1.1"] * 2
