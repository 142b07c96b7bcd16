"""The shell on a server's PostgreSQL port (`refimpl sql --pg HOST:PORT`), through psycopg.

One connection is one session on the server, so a transaction is the server's own: BEGIN,
the statements and COMMIT or ROLLBACK may come on any lines, each statement runs at once
and shows its answer. TLS is used when the server serves it (`sslmode=prefer`, psql's
default). psycopg comes with the `pg` extra; without it `PgBackend` raises `ShellError`
saying how to install it.
"""

from __future__ import annotations

import datetime
import decimal
import math
from typing import TYPE_CHECKING, Any

from refimpl.shell.statements import OPEN_TRANSACTION, Piece, ShellError, StatementAnswer

if TYPE_CHECKING:
    import psycopg

# Long enough for a TLS login to a busy server (the server itself gives a client
# pg_login_timeout_s to log in), short enough that a dead address is reported.
CONNECT_TIMEOUT_SECONDS = 30
# The protocol's type numbers (OIDs) of the types this database has; the rest show as text.
_TYPES = {16: "BOOLEAN", 20: "BIGINT", 21: "INT", 23: "INT", 700: "DOUBLE", 701: "DOUBLE"}
_TYPES |= {1114: "TIMESTAMP", 1184: "TIMESTAMP", 25: "STRING", 1043: "STRING"}
NO_PSYCOPG = (
    "--pg needs psycopg, which is not installed; install it with: pip install 'refimpl[pg]'"
)


def _value(value: Any) -> Any:
    """A value as the JSON answers have it (what `render` shows)."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC).replace(tzinfo=None)
        digits = "milliseconds" if value.microsecond % 1000 == 0 else "microseconds"
        return value.isoformat(timespec=digits) + "Z"
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def parse_address(address: str) -> tuple[str, int]:
    """`HOST:PORT` (or `[v6]:PORT`) as given to --pg; ShellError when it is not one."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ShellError(f"--pg takes HOST:PORT (such as 127.0.0.1:5432), not '{address}'")
    return host, int(port)


class PgBackend:
    """A PostgreSQL protocol connection to a server, as `user` with `token` as password."""

    note = ""

    def __init__(self, address: str, user: str, token: str | None, database: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise ShellError(NO_PSYCOPG) from None
        self._psycopg = psycopg
        self._address = parse_address(address)
        self._user, self._token = user, token
        self.database = database
        self._connection = self._connect(database)
        host, port = self._address
        secured = "TLS" if self._connection.pgconn.ssl_in_use else "no TLS"
        self.where = f"{host}:{port} (PostgreSQL protocol, {secured})"

    def _connect(self, database: str) -> psycopg.Connection[Any]:
        psycopg = self._psycopg
        host, port = self._address
        try:
            return psycopg.connect(
                host=host,
                port=port,
                user=self._user,
                password=self._token or "",
                dbname=database,
                sslmode="prefer",
                connect_timeout=CONNECT_TIMEOUT_SECONDS,
                autocommit=True,  # BEGIN, COMMIT and ROLLBACK are the user's, sent as typed
                application_name="refimpl sql",
            )
        except psycopg.Error as exc:
            raise ShellError(f"cannot connect to {host}:{port}: {str(exc).strip()}") from None

    @property
    def in_transaction(self) -> bool:
        status = self._connection.info.transaction_status
        return status in (status.INTRANS, status.INERROR)

    def run(self, text: str) -> StatementAnswer:
        psycopg = self._psycopg
        try:
            with self._connection.cursor() as cursor:
                cursor.execute(text.encode("utf-8"))
                if cursor.description is None:
                    return StatementAnswer(
                        None, (), cursor.statusmessage or "", max(cursor.rowcount, 0)
                    )
                columns = tuple(
                    (column.name, _TYPES.get(column.type_code, "STRING"))
                    for column in cursor.description
                )
                rows = tuple(tuple(_value(v) for v in row) for row in cursor.fetchall())
                return StatementAnswer(columns, rows, "", len(rows))
        except psycopg.Error as exc:
            raise _error(text, exc) from None

    def statement(self, piece: Piece) -> StatementAnswer:
        return piece.run_on(self.run)

    def use(self, database: str) -> None:
        if self.in_transaction:
            raise ShellError(OPEN_TRANSACTION)
        connection = self._connect(database)
        self._connection.close()
        self._connection, self.database = connection, database

    def interrupted(self) -> str:
        """psycopg sent the server a cancel request when Ctrl-C came and waited for the
        statement to stop; a connection it had to give up on is opened again."""
        if self._connection.closed:
            self._connection = self._connect(self.database)
            return (
                "Cancel request sent; the statement did not stop in time, so the connection"
                " was opened again (an open transaction is rolled back)."
            )
        status = self._connection.info.transaction_status
        if status == status.INERROR:
            return "Cancel request sent: the statement was canceled; ROLLBACK the transaction."
        return "Cancel request sent: the statement was canceled."

    def close(self) -> None:
        self._connection.close()  # the server rolls back a transaction left open


def _error(text: str, exc: psycopg.Error) -> ShellError:
    """The server's error sentence and its position (a character offset in `text`, 1-based)
    as a line and column; a lost connection says so."""
    diag = exc.diag
    message = diag.message_primary or str(exc).strip() or type(exc).__name__
    if diag.sqlstate:
        message = f"{message} (SQLSTATE {diag.sqlstate})"
    position = diag.statement_position
    if not position or not position.isdigit():
        return ShellError(message)
    offset = min(int(position), len(text) + 1) - 1
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return ShellError(message, line, column)
