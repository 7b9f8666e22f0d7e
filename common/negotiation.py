"""The API's content negotiation: a view that can answer in one format only answers
in it."""

from __future__ import annotations

from collections.abc import Sequence

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request


class SingleFormatNegotiation(DefaultContentNegotiation):
    """DRF's, except for the answer of a view with one renderer (every view of the
    API: JSON): that one, whatever the ``Accept`` header says. There is nothing else
    to offer, and HTTP lets a server answer what it has rather than 406 (RFC 9110,
    12.5.1). Parsing ``Accept`` was a large share of the product read's own time
    under a crowd (``docs/profile/reads/after-cache.md``). The request body is DRF's as
    before: a body that is not JSON stays a 415. The schema view, with its JSON and
    YAML renderers, negotiates as DRF does."""

    # A Sequence where DRF's types say Iterable: DRF passes its list of renderers (and an
    # isinstance against the ABC would cost every request more than the rest of this).
    def select_renderer(self, request: Request, renderers: Sequence[BaseRenderer],  # type: ignore[override]
                        format_suffix: str | None = None) -> tuple[BaseRenderer, str]:
        if len(renderers) == 1:
            return renderers[0], renderers[0].media_type
        chosen: tuple[BaseRenderer, str] = super().select_renderer(request, renderers, format_suffix)
        return chosen
