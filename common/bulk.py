"""Rows written in one INSERT, for a writer whose batches are its hot path: the gate's
persisters, whose orders and ledger rows are most of what they do.

``QuerySet.bulk_create`` builds a model instance per row and passes each value
through its field (``pre_save``, ``get_db_prep_save``), then MySQLdb escapes the
flattened values one Python call each. ``rows_insert`` takes plain tuples and hands
them to one ``executemany``, which MySQLdb sends as multi-row INSERTs, escaping a
row at a time in C, which cuts a persister's CPU per order written (the figures:
docs/strategies/gate.md and ``docs/profile/gate-gap/``).

The columns, the defaults of the fields left out and the datetimes' database form
come from the model and the connection, as ``bulk_create``'s would. What it skips is
the model instances: no signals (``bulk_create`` sends none either), no field
validation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db import connections, models, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone


def rows_insert(model: type[models.Model], fields: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert ``rows``, each a tuple of values for ``fields`` (field names; a
    foreign key's value is the related row's id). Values are ints, strings, None or
    aware datetimes. A field left out gets its default, or now if it is
    ``auto_now``/``auto_now_add``; the auto-increment key gets MySQL's.
    Inside the caller's transaction, if it has one.

    :raises ValueError: a field left out has no default.
    :raises django.db.IntegrityError: a row breaks a constraint (nothing of the
        statement is written).
    """
    if not rows:
        return
    meta = model._meta
    named = [_column_field(model, name) for name in fields]
    rest = [field for field in meta.concrete_fields
            if field not in named and not isinstance(field, models.AutoField)]
    connection = connections[router.db_for_write(model)]
    constant = [_default(field, connection) for field in rest]
    # Datetime columns are the one kind MySQLdb cannot take as they come (aware).
    adapted = [i for i, field in enumerate(named) if isinstance(field, models.DateTimeField)]
    adapt = connection.ops.adapt_datetimefield_value
    values = [_values(row, adapted, adapt, constant) for row in rows]
    columns = ", ".join(connection.ops.quote_name(_column(field)) for field in [*named, *rest])
    placeholders = ", ".join(["%s"] * (len(named) + len(rest)))
    sql = f"INSERT INTO {connection.ops.quote_name(meta.db_table)} ({columns}) VALUES ({placeholders})"
    with connection.cursor() as cursor:
        if len(values) == 1:
            cursor.execute(sql, values[0])  # and logged as the one statement it is
        else:
            cursor.executemany(sql, values)


def _column_field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field):  # the far side of a relation
        raise ValueError(f"{model.__name__}.{name} is no column")
    return field


def _column(field: models.Field[Any, Any]) -> str:
    if field.column is None:
        raise ValueError(f"{field.name} is no column")
    return field.column


def _default(field: models.Field[Any, Any], connection: BaseDatabaseWrapper) -> Any:
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return connection.ops.adapt_datetimefield_value(timezone.now())
    if not field.has_default() and not field.null:
        raise ValueError(f"{field.model.__name__}.{field.name} has no default: give its values")
    return field.get_db_prep_save(field.get_default(), connection)


def _values(row: tuple[Any, ...], adapted: list[int], adapt: Callable[[Any], Any],
            constant: list[Any]) -> list[Any]:
    """One row's parameters: its values, the datetimes among them adapted, then the
    left-out fields'."""
    values = [*row, *constant]
    for i in adapted:
        values[i] = adapt(values[i])
    return values
