"""The API's content negotiation: it speaks JSON only."""

from __future__ import annotations

from rest_framework.negotiation import DefaultContentNegotiation


class JSONOnlyNegotiation(DefaultContentNegotiation):
    """DRF's for the request body (a body that is not JSON stays a 415), and JSON
    for every answer, whatever the ``Accept`` header says: there is nothing else to
    offer, and HTTP lets a server answer what it has rather than 406 (RFC 9110,
    12.5.1). Parsing ``Accept`` was a sixth of the product read's own time under a
    crowd (``docs/profile/reads/after-cache.md``)."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type
