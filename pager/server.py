"""The pager's HTTP API (see the package's docstring)."""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

logger = logging.getLogger("pager")

# Alertmanager's webhook payload version this reads (Alertmanager's docs:
# configuration, <webhook_config>).
VERSION = "4"
MAX_BODY = 1 << 20  # a notification of many alerts is a few kB each; Alertmanager truncates past max_alerts


class Pager:
    """The notifications received, newest last, and the log they are written to."""

    def __init__(self, *, log: Path | None = None, keep: int = 500):
        self.log = log
        self.received: collections.deque[dict] = collections.deque(maxlen=keep)
        self.lock = threading.Lock()

    def receive(self, notification: dict) -> int:
        """Keep ``notification`` and log each of its alerts; the number of alerts.

        :raises ValueError: not a webhook notification of the version this reads.
        """
        if not isinstance(notification, dict) or notification.get("version") != VERSION:
            raise ValueError(f"not an Alertmanager webhook notification, version {VERSION}")
        alerts = notification.get("alerts")
        if not isinstance(alerts, list) or not all(isinstance(a, dict) for a in alerts):
            raise ValueError("alerts must be a list of objects")
        received_at = time.time()
        lines = [json.dumps({
            "received_at": round(received_at, 3),
            "receiver": notification.get("receiver"),
            "status": alert.get("status"),
            "alertname": (alert.get("labels") or {}).get("alertname"),
            "labels": alert.get("labels") or {},
            "summary": (alert.get("annotations") or {}).get("summary"),
            "starts_at": alert.get("startsAt"),
            "ends_at": alert.get("endsAt"),
        }, sort_keys=True) for alert in alerts]
        with self.lock:
            self.received.append({**notification, "received_at": received_at})
            if self.log is not None:
                with self.log.open("a") as f:
                    f.writelines(line + "\n" for line in lines)
        for line in lines:
            logger.info(line)
        return len(lines)

    def notifications(self, status: str | None = None) -> list[dict]:
        """What was received, newest first; with ``status``, only notifications in it."""
        with self.lock:
            kept = list(self.received)
        return [n for n in reversed(kept) if status is None or n.get("status") == status]


class _Handler(BaseHTTPRequestHandler):
    server_version = "pager"
    pager: Pager

    def log_message(self, format, *args):  # each alert is logged as received; requests are not
        pass

    def _answer(self, status: int, body: dict | list) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path in ("/-/ready", "/-/healthy"):
            return self._answer(200, {"status": "ok"})
        if url.path != "/alerts":
            return self._answer(404, {"error": "not_found", "message": f"no {url.path} here"})
        status = parse_qs(url.query).get("status", [None])[0]
        if status not in (None, "firing", "resolved"):
            return self._answer(400, {"error": "invalid_input", "message": "status is firing or resolved"})
        return self._answer(200, self.pager.notifications(status))

    def do_POST(self):
        if urlsplit(self.path).path != "/alerts":
            return self._answer(404, {"error": "not_found", "message": f"no {self.path} here"})
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            return self._answer(400, {"error": "invalid_input", "message": f"a body of 1..{MAX_BODY} bytes"})
        try:
            count = self.pager.receive(json.loads(self.rfile.read(length)))
        except ValueError as e:  # JSONDecodeError included
            return self._answer(400, {"error": "invalid_input", "message": str(e)})
        return self._answer(200, {"alerts": count})


def serve(pager: Pager, *, host: str, port: int) -> ThreadingHTTPServer:
    """The pager's server, serving on its own thread."""
    handler = type("Handler", (_Handler,), {"pager": pager})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="pager", daemon=True).start()
    return server
