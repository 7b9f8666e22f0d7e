"""What a database error means for an answer: the server refused a statement, or it
cannot be reached at all (then the client is told to retry, with 503)."""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections
from MySQLdb.constants import CR, ER

ER_CONNECTION_KILLED = 1927  # MariaDB's; not among mysqlclient's constants
# The client's "cannot connect", "gone away", "lost during query", and the server's
# "shutting down" and "connection killed".
_CONNECTION_ERRORS = {CR.CONNECTION_ERROR, CR.CONN_HOST_ERROR, CR.SERVER_GONE_ERROR, CR.SERVER_LOST,
                      CR.SERVER_LOST_EXTENDED, ER.SERVER_SHUTDOWN, ER_CONNECTION_KILLED}
# Of those, the ones before any connection was made: nothing was sent.
_NEVER_CONNECTED = {CR.CONNECTION_ERROR, CR.CONN_HOST_ERROR}


def database_unreachable(error: BaseException, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether ``error`` came from a connection that could not be made or died (the
    server stopped, restarted, or the network dropped), not from a statement the
    server refused: by its code, or else by asking the connection itself (one
    Django closed, or one that no longer answers a ping)."""
    if not isinstance(error, (OperationalError, InterfaceError)):
        return False
    if error.args and error.args[0] in _CONNECTION_ERRORS:
        return True  # even if Django has opened another connection since
    connection = connections[using]
    return connection.connection is None or not connection.is_usable()


def database_never_connected(error: BaseException) -> bool:
    """Whether ``error`` came from a connection that was never made: the statement was
    not sent, so it ran nowhere."""
    return isinstance(error, (OperationalError, InterfaceError)) and bool(error.args) and \
        error.args[0] in _NEVER_CONNECTED


def database_gave_up(error: BaseException) -> bool:
    """Whether the server rolled the statement (or its transaction) back because it
    waited too long for a row lock or chose it as a deadlock's victim: nothing was
    written, and a retry may well pass."""
    return isinstance(error, OperationalError) and bool(error.args) and error.args[0] in (
        ER.LOCK_WAIT_TIMEOUT, ER.LOCK_DEADLOCK)


def database_deadlocked(error: BaseException) -> bool:
    """Whether the server chose this transaction as a deadlock's victim and rolled
    all of it back: doing it again is the remedy (InnoDB's own advice)."""
    return isinstance(error, OperationalError) and bool(error.args) and error.args[0] == ER.LOCK_DEADLOCK
