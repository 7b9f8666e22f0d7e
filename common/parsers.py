"""The API's JSON parser."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """DRF's, and a body nested too deeply for Python's JSON decoder (``[[[[…`` a few
    thousand deep fits in 16 KB) is a parse error, 400 ``invalid``, not a
    RecursionError and a 500. DRF already turns every other undecodable body (not
    JSON, not UTF-8) into a parse error."""

    def parse(self, stream: IO[Any], media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> dict[str, Any]:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
