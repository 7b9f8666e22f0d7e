"""The client's reset and reads survive a kept-alive connection dropped unanswered,
as nginx drops its idle ones when it reloads, or reset when a partition lost its
close; a purchase is never sent twice by the client (its buyer retries, with its key)."""

import json
import socket
import struct
import threading

import pytest
import requests

from loadtest.client import RESET_TRIES, FlashsaleClient, SignedUpBuyers


def _serve(answers: list[bytes | None]) -> tuple[int, list[bytes], threading.Thread]:
    """A server taking one request per connection: each answer in turn (a whole
    response, or a 200's JSON body), or None for a connection reset (RST) with no
    answer."""
    server = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def serve():
        with server:
            for answer in answers:
                connection, _ = server.accept()
                seen.append(connection.recv(65536).split(b"\r\n", 1)[0])
                if answer is None:
                    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                elif answer.startswith(b"HTTP/"):
                    connection.sendall(answer)
                else:
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                       b"Content-Length: " + str(len(answer)).encode() + b"\r\n\r\n" + answer)
                connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server.getsockname()[1], seen, thread


def test_a_read_reset_unanswered_is_asked_again_on_a_new_connection():
    port, seen, thread = _serve([None, json.dumps({"sku": "p", "orders": 3}).encode()])
    audit = FlashsaleClient(f"http://127.0.0.1:{port}", timeout=5).audit("p", settle=0)
    thread.join(5)
    assert audit == {"sku": "p", "orders": 3}
    assert seen == [b"GET /api/products/p/audit HTTP/1.1"] * 2


def test_a_purchase_reset_unanswered_is_not_sent_again_by_the_client():
    port, seen, thread = _serve([None, b"{}"])
    with pytest.raises(requests.ConnectionError):
        FlashsaleClient(f"http://127.0.0.1:{port}", timeout=5).order("p", 1, "u1", key="k1")
    assert seen == [b"POST /api/orders HTTP/1.1"]


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


def _busy(retry_after: int) -> bytes:
    body = json.dumps({"error": "busy", "message": "the database gave up waiting for a row lock"}).encode()
    head = (f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            f"Retry-After: {retry_after}\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


def test_a_reset_answered_busy_is_asked_again_after_its_retry_after():
    port, seen, thread = _serve([_busy(0), json.dumps({"sku": "p", "stock": 3}).encode()])
    answer = FlashsaleClient(f"http://127.0.0.1:{port}", admin_token="t", timeout=5).reset("p", 3)
    thread.join(5)
    assert answer == {"sku": "p", "stock": 3}
    assert seen == [b"POST /api/admin/products/p/reset HTTP/1.1"] * 2


def test_a_reset_busy_at_every_try_raises_with_the_error_body():
    port, seen, thread = _serve([_busy(0)] * RESET_TRIES)
    with pytest.raises(requests.HTTPError, match='503 Server Error.*"error": "busy"'):
        FlashsaleClient(f"http://127.0.0.1:{port}", admin_token="t", timeout=5).reset("p", 3)
    thread.join(5)
    assert seen == [b"POST /api/admin/products/p/reset HTTP/1.1"] * RESET_TRIES


def test_a_stack_on_this_machine_is_asked_directly_whatever_proxy_the_environment_sets(monkeypatch):
    target, at_target, target_thread = _serve([json.dumps({"sku": "p", "orders": 3}).encode()])
    proxy, at_proxy, proxy_thread = _serve([json.dumps({"sku": "p", "orders": 4}).encode()])
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert FlashsaleClient(f"http://127.0.0.1:{target}", timeout=5).audit("p", settle=0)["orders"] == 3
    target_thread.join(5)
    assert at_target == [b"GET /api/products/p/audit HTTP/1.1"]
    # Anywhere else, the environment's proxy carries the request, as requests does.
    assert FlashsaleClient("http://flashsale.invalid", timeout=5).audit("p", settle=0)["orders"] == 4
    proxy_thread.join(5)
    assert at_proxy == [b"GET http://flashsale.invalid/api/products/p/audit HTTP/1.1"]


def test_a_threads_sign_ups_share_one_kept_alive_connection():
    server = socket.create_server(("127.0.0.1", 0))
    connections = []

    def serve():  # keeps each connection, answering every request on it with a token
        with server:
            while True:
                try:
                    connection, _ = server.accept()
                except OSError:
                    return
                connections.append(connection)
                threading.Thread(target=answer, args=(connection,), daemon=True).start()

    def answer(connection):
        with connection:
            while connection.recv(65536):
                body = json.dumps({"token": f"t{len(connections)}"}).encode()
                connection.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                                   b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    threading.Thread(target=serve, daemon=True).start()
    buyers = SignedUpBuyers(f"http://127.0.0.1:{server.getsockname()[1]}", timeout=5)
    assert [buyers[label] for label in ("a", "b", "c", "a")] == ["t1", "t1", "t1", "t1"]
    assert len(connections) == 1  # each sign-up on a connection of its own before
    server.close()
