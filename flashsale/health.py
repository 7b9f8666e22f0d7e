"""``/healthz`` (this instance and each backend it talks to) and ``/api/ping``
(no backend at all: the ceiling a load test compares against)."""

from __future__ import annotations

import socket

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django_redis import get_redis_connection


def _check(probe) -> str:
    try:
        probe()
    except Exception as e:  # any failure is the answer, not an error of this view
        return f"{type(e).__name__}: {e}"
    return "ok"


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _redis() -> None:
    get_redis_connection("default").ping()


def _zookeeper() -> None:
    # The four-letter word needs no session: cheaper than starting a client here.
    # One member of an ensemble answering is enough: that is all a client needs.
    errors = []
    for address in settings.ZOOKEEPER_HOSTS.split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=1) as sock:
                sock.sendall(b"ruok")
                answer = sock.recv(16)
        except OSError as e:
            errors.append(f"{address}: {e}")
            continue
        if answer == b"imok":
            return
        errors.append(f"{address}: ruok answered {answer!r}")
    raise ConnectionError("; ".join(errors))


def healthz(request):
    body = {
        "instance": settings.FLASHSALE_INSTANCE,
        "strategy": settings.FLASHSALE_STRATEGY,
        "database": _check(_database),
        "redis": _check(_redis),
        "zookeeper": _check(_zookeeper),
    }
    healthy = all(body[k] == "ok" for k in ("database", "redis", "zookeeper"))
    return JsonResponse(body, status=200 if healthy else 503)


def ping(request):
    return JsonResponse({"instance": settings.FLASHSALE_INSTANCE})
