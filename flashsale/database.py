"""What a database error means for an answer: the server refused a statement, or it
cannot be reached at all (then the client is told to retry, with 503)."""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections
from MySQLdb.constants import ER


def database_unreachable(error: BaseException, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether ``error`` came from a connection that could not be made or died (the
    server stopped, restarted, or the network dropped), not from a statement the
    server refused. Asks the connection itself, so it holds for any error code:
    a connection Django closed, or one that no longer answers a ping."""
    if not isinstance(error, (OperationalError, InterfaceError)):
        return False
    connection = connections[using]
    return connection.connection is None or not connection.is_usable()


def database_gave_up(error: BaseException) -> bool:
    """Whether the server rolled the statement (or its transaction) back because it
    waited too long for a row lock or chose it as a deadlock's victim: nothing was
    written, and a retry may well pass."""
    return isinstance(error, OperationalError) and bool(error.args) and error.args[0] in (
        ER.LOCK_WAIT_TIMEOUT, ER.LOCK_DEADLOCK)
