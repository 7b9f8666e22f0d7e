"""One request, followed through the logs. nginx names every request (``$request_id``,
32 hex digits, whatever a client sent), writes the name in its access log, and passes
it on as ``X-Request-ID``; an app puts it in every log line the request's thread
writes (``RequestIdFilter``) and answers with it, so that a buyer, an operator and
both logs quote the same name. A purchase's order keeps it (``Order.request_id``; the
gate's through its stream entry and the persister's line), so the name leads from
nginx's line to the row.

A request that reached an instance without nginx (a test, an operator's curl to its
port) keeps a well-formed ``X-Request-ID`` of its own, or is given one.
"""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.http import HttpRequest

_current: ContextVar[str | None] = ContextVar("request_id", default=None)
_WELL_FORMED = re.compile(r"[0-9A-Za-z-]{1,64}")


def request_named(request: HttpRequest) -> str:
    """Name ``request`` for the log lines its thread writes from now on, and return the
    name. Not undone when the request ends: Django logs a 5xx answer after the last
    middleware returned, and the thread's next request names itself anew."""
    given = request.META.get("HTTP_X_REQUEST_ID", "")
    name = given if _WELL_FORMED.fullmatch(given) else uuid.uuid4().hex
    _current.set(name)
    return name


def request_id_current() -> str:
    """The name of the request this thread serves ("": none, a persister's)."""
    return _current.get() or ""


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` to every record: the one the line names (``extra``: a
    persister's line of an order names the request that placed it), else the request
    its thread serves, else None (a lock watchdog's)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", None):
            record.request_id = _current.get()
        return True
