"""What every API of the project shares in its input, so that what a request may
carry is what the OpenAPI schema says it may: a string field that takes strings only,
and request bodies that refuse keys they do not know."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from itertools import combinations
from typing import TYPE_CHECKING, Any

from django.core.validators import ProhibitNullCharactersValidator, RegexValidator
from drf_spectacular.extensions import OpenApiSerializerExtension
from rest_framework import serializers

from .strategies import STRATEGY_NAMES

if TYPE_CHECKING:
    from drf_spectacular.openapi import AutoSchema
    from drf_spectacular.utils import Direction

# DRF refuses a NUL in any text (ProhibitNullCharactersValidator); as a regular
# expression the same rule reaches the schema as ``pattern``, so a client (and
# schemathesis) knows that a string with a NUL is not a valid one.
_NO_NUL = RegexValidator(
    r"^[^\x00]*$", message="Null characters are not allowed.", code="null_characters_not_allowed"
)


class StrictCharField(serializers.CharField):
    """A string and nothing else, taken as given. DRF's CharField also takes a number
    and stores it as text, and trims whitespace (a name of one control character then
    counts as blank), neither of which the schema's ``type: string, minLength: 1``
    says. A NUL is refused, as DRF does, and the schema says that too."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        self.validators = [
            _NO_NUL if isinstance(v, ProhibitNullCharactersValidator) else v for v in self.validators
        ]

    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrategyField(serializers.ChoiceField):
    """A strategy's name (``common.strategies``); a wrong one is refused with the
    list of the known ones."""

    def __init__(self, **kwargs: Any) -> None:
        known = ", ".join(STRATEGY_NAMES)
        super().__init__(choices=STRATEGY_NAMES, error_messages={
            "invalid_choice": f'"{{input}}" is not a strategy; choose one of: {known}'}, **kwargs)


class MomentField(serializers.DateTimeField):
    """An ISO 8601 moment, kept in UTC. One that UTC cannot hold (9999-12-31T23:59-14:00
    is in the year 10000, past Python's datetime) is taken as the last moment it can
    hold, or the first: for a sale's window, "never" and "always" either way, where
    DRF would refuse a moment the schema's ``format: date-time`` allows."""

    def enforce_timezone(self, value: datetime) -> datetime:
        try:
            return super().enforce_timezone(value)
        except serializers.ValidationError:
            if value.tzinfo is None:
                raise
            edge = datetime.max if value.year > 5000 else datetime.min
            return edge.replace(tzinfo=UTC)


class ClosedInputSerializer(serializers.Serializer[Any]):
    """A request body that refuses a key it does not know, 400 ``invalid`` naming it:
    a client's typo (``"qty"``) is an error, not a default. The schema says so
    (``additionalProperties: false``, from ``ClosedInputSchema``).

    ``exclusive`` lists groups of keys of which a body may carry one at most (two
    ways to say the same thing); the schema says that too (``not`` …
    ``required``). ``refused`` lists, as JSON Schema, other bodies the operation's
    service refuses (400) whatever else they carry: the schema states the rule, the
    service keeps it."""

    exclusive: tuple[tuple[str, ...], ...] = ()
    refused: tuple[dict[str, Any], ...] = ()

    def to_internal_value(self, data: object) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(str(key) for key in data if key not in self.fields)
            if unknown:
                raise serializers.ValidationError({key: ["unknown field"] for key in unknown})
            for group in self.exclusive:
                given = [key for key in group if key in data]
                if len(given) > 1:
                    raise serializers.ValidationError({key: [f"one of {', '.join(group)}, not both"]
                                                       for key in given})
        return super().to_internal_value(data)


class ClosedInputSchema(OpenApiSerializerExtension):
    """A ``ClosedInputSerializer`` in the schema: as drf-spectacular draws it, and
    ``additionalProperties: false`` (drf-spectacular finds this once the module is
    imported, as the views do)."""

    target_class = ClosedInputSerializer
    match_subclasses = True

    def map_serializer(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema = {**schema, "additionalProperties": False}
        refused = [*({"required": list(pair)} for group in self.target.exclusive
                     for pair in combinations(group, 2)), *self.target.refused]
        if refused:
            schema["not"] = {"anyOf": refused}
        return schema
