"""The races app's own error, in the project's one hierarchy and JSON shape."""

from __future__ import annotations

from rest_framework import status

from common.errors import ApplicationError


class RaceRunning(ApplicationError):
    """A race is running (``race_id``): one at a time, since they share the machine.
    Follow it at ``/api/races/<race_id>``, and start the next once it is over."""

    status_code = status.HTTP_409_CONFLICT
    code = "race_running"
