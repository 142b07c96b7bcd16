"""The one exception hierarchy of refimpl.

Every failure a caller can cause or meet has its own class here. The engine raises them
without knowing about HTTP; `refimpl.http.error_answers` maps each class to a status in one place.
Messages are one sentence a person understands: what is wrong, and how to fix it where that
is not obvious.
"""

from __future__ import annotations


class KdbError(Exception):
    """Base of every error refimpl raises on purpose."""

    # Which statement of a script of several failed (1-based); None for a single statement
    # or a failure outside SQL. Set by the session that ran the script.
    statement_index: int | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def details(self) -> dict[str, object]:
        """Extra JSON fields an error answer carries besides `error`."""
        return {}


# --- SQL: the statement itself is wrong -------------------------------------------------


class SqlError(KdbError):
    """A statement that cannot run as written."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line = line
        self.column = column

    def details(self) -> dict[str, object]:
        if self.line is None:
            return {}
        return {"position": {"line": self.line, "column": self.column}}


class SqlSyntaxError(SqlError):
    """The text does not parse."""


class ReplicationSyntaxError(SqlSyntaxError):
    """A replication connection's command (IDENTIFY_SYSTEM, START_REPLICATION, ...) does not
    parse."""


class UnknownTable(SqlError):
    def __init__(self, table: str):
        super().__init__(f"table '{table}' does not exist")
        self.table = table


class TableExists(SqlError):
    def __init__(self, table: str):
        super().__init__(f"table '{table}' already exists; use CREATE TABLE IF NOT EXISTS")


class UnknownColumn(SqlError):
    def __init__(self, column: str, table: str | None = None):
        where = f" in table '{table}'" if table else ""
        super().__init__(f"column '{column}' does not exist{where}")
        self.name = column  # its name (`column` is a SqlError's position)


class AmbiguousColumn(SqlError):
    pass


class DuplicateColumn(SqlError):
    pass


class TypeMismatch(SqlError):
    """A value or expression of the wrong type."""


class DuplicateKey(SqlError):
    def __init__(self, table: str, key: object):
        super().__init__(
            f"duplicate primary key {key!r} in table '{table}'; nothing of the statement was"
            " applied"
        )


class UniqueViolation(DuplicateKey):
    """Two rows would hold one key of a UNIQUE index or constraint."""

    def __init__(self, table: str, index: str, key: tuple[object, ...]):
        shown = repr(key[0]) if len(key) == 1 else repr(key)
        SqlError.__init__(
            self,
            f"duplicate value {shown} in {index} of table '{table}': a UNIQUE index allows"
            " each value once; nothing of the statement was applied",
        )


class UnknownIndex(SqlError):
    def __init__(self, index: str):
        super().__init__(f"index '{index}' does not exist")


class IndexExists(SqlError):
    def __init__(self, index: str, table: str):
        super().__init__(
            f"index '{index}' already exists (on table '{table}'); index names"
            " are the database's, so pick another"
        )


class NotNullViolation(SqlError):
    pass


class InvalidValue(SqlError):
    """A literal or parameter that cannot be the value asked for (a bad timestamp, say)."""


class NotAllowed(SqlError):
    """A statement that is valid SQL but not allowed here (SUBSCRIBE in /exec, say)."""


class AnswersMoreThanOnce(NotAllowed):
    """SUBSCRIBE where one answer goes back (a statement of `/exec`, of the PostgreSQL
    protocol). The engine raises it naming no protocol; the layer that refused it words it
    (`refused_by`: what cannot run it, `served_at`: where it is served) as the spec says."""

    def __init__(self, refused_by: str = "a statement", served_at: str | None = None) -> None:
        self.refused_by = refused_by
        self.served_at = served_at
        message = f"SUBSCRIBE answers more than once, so {refused_by} cannot run it"
        super().__init__(message if served_at is None else f"{message}; use {served_at}")


class NeedsNotifications(NotAllowed):
    """LISTEN, UNLISTEN or NOTIFY where no session can be sent notifications (a statement of
    `/exec`). The engine raises it naming no protocol; the layer that refused it says where
    to go instead (`instead`), as the spec gives it."""

    def __init__(self, statement: str, instead: str | None = None) -> None:
        self.statement = statement
        self.instead = instead
        message = f"{statement} needs a session that can be sent notifications"
        super().__init__(message if instead is None else f"{message}; {instead}")


class NotASubscription(SqlError):
    """A live query whose text is not one `SUBSCRIBE SELECT ...` statement; `taken_by` names
    what took it (the protocol layer words it)."""

    def __init__(self, taken_by: str = "a subscription") -> None:
        self.taken_by = taken_by
        super().__init__(f"the query of {taken_by} must start with SUBSCRIBE SELECT")


class ParameterError(SqlError):
    """Wrong number or kind of `?` parameters."""


class TransactionError(SqlError):
    """COMMIT without BEGIN, BEGIN inside a transaction, and the like."""


class FailedTransaction(TransactionError):
    """A statement sent in a transaction that an error ended, before its ROLLBACK."""


class InsideTransactionBlock(TransactionError):
    """A statement that cannot run inside a transaction, sent among others in one text of
    the PostgreSQL protocol (which makes them one transaction)."""


class NoActiveTransaction(TransactionError):
    """SAVEPOINT, RELEASE, ROLLBACK TO or a DECLARE without HOLD outside a transaction."""


class UnknownSavepoint(TransactionError):
    """RELEASE or ROLLBACK TO a savepoint the open transaction does not have."""


class UnknownCursor(SqlError):
    """FETCH, MOVE or CLOSE of a cursor the session has not declared."""


class UnknownSetting(SqlError):
    """SET or SHOW of a session setting that does not exist (the PostgreSQL protocol's)."""


class UnknownFunction(SqlError):
    pass


class ResultTooLarge(SqlError):
    pass


class SubqueryRows(SqlError):
    """A subquery used as a value answered more than one row."""


class RecursionLimit(SqlError):
    """A WITH RECURSIVE table went on for more rounds than a query may take."""


class UnknownRoutine(SqlError):
    """A trigger or procedure that does not exist (DROP TRIGGER, DROP PROCEDURE, CALL)."""

    def __init__(self, kind: str, name: str, hint: str = ""):
        super().__init__(f"{kind} '{name}' does not exist{hint}")


class RoutineExists(SqlError):
    """CREATE TRIGGER or CREATE PROCEDURE of a name the database has."""

    def __init__(self, kind: str, name: str, hint: str):
        super().__init__(f"{kind} '{name}' already exists; {hint}")


class RoutineDepth(SqlError):
    """Triggers and CALLs nested deeper than a statement may (a trigger firing itself, say)."""


class StatementTimeout(SqlError):
    @classmethod
    def ran_too_long(cls) -> StatementTimeout:
        """A statement stopped at its deadline (parsing, planning or evaluating)."""
        return cls(
            "the statement ran longer than the server's statement_timeout_ms and was"
            " stopped; narrow its WHERE (a time range prunes partitions) or raise the limit"
        )


class LockTimeout(SqlError):
    """A writer waited for its database's write lock, which another transaction holds,
    longer than its lock_timeout (PostgreSQL's 55P03, lock_not_available). Which session
    holds it is not said: that is another user's business."""

    def __init__(self, database: str, waited: float) -> None:
        super().__init__(
            f"canceling statement due to lock timeout: waited {waited * 1000:g} ms"
            f" (lock_timeout) for database '{database}', which another transaction holds;"
            " try again, or raise lock_timeout"
        )


class SearchPastDeadline(StatementTimeout):
    """A regular expression's search not started: its worst case is past the statement's
    time left (`refimpl.engine.query.regex`). The statement timeout's error, saying why no
    search ran, so that a user can tell a refusal from a search that ran long."""

    def __init__(self, characters: int, steps: int, worst: float, left: float) -> None:
        super().__init__(
            f"a regular expression's search of a {characters:,}-character text could take"
            f" up to {worst:.1f} s ({steps:,} steps of its program a character, at worst),"
            f" more than the {max(left, 0.0):.1f} s left to the statement under the server's"
            " statement_timeout_ms, so it was not started; use a pattern with fewer optional"
            " parts or repetitions, narrow the WHERE to shorter texts, or raise the limit"
        )


class StatementCancelled(SqlError):
    """A running statement stopped because its client asked (a PostgreSQL CancelRequest)."""

    def __init__(self) -> None:
        super().__init__("canceling statement due to user request")


class CopyError(SqlError):
    """Bad COPY data or options: the message names the line and column."""


class CopyFormatError(CopyError):
    """Binary COPY data whose framing cannot be read (signature, flags, a tuple's fields)."""


class CopyFailed(SqlError):
    """The client ended its COPY FROM STDIN data with a failure (PostgreSQL's CopyFail)."""


class StatementTooLarge(SqlError):
    """SQL past a limit of its size: its text, a list's length, or its nesting depth."""


# --- Catalog objects named outside SQL ---------------------------------------------------


class NotFound(KdbError):
    """A database, or a table named by a route parameter, that does not exist."""


class UnknownDatabase(NotFound):
    def __init__(self, name: str):
        super().__init__(f"database '{name}' does not exist")
        self.name = name


class DatabaseExists(SqlError):
    def __init__(self, name: str):
        super().__init__(f"database '{name}' already exists; use CREATE DATABASE IF NOT EXISTS")


class UserError(SqlError):
    """Unknown or duplicate users and tokens in user-management statements."""


class UnknownPublication(UserError):
    """A publication statement or a replication stream names no publication of that name."""

    def __init__(self, name: str) -> None:
        super().__init__(f'publication "{name}" does not exist')


class SlotError(SqlError):
    """A replication slot command that cannot be done (a 400 over HTTP); `sqlstate` is
    PostgreSQL's code for it, which a replication connection answers."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


# --- Who may do what ---------------------------------------------------------------------


class Unauthorized(KdbError):
    """No valid credentials where they are needed (a wrong, expired or revoked token)."""

    # The user whose credential was refused, when it names one (an expired token): for the
    # server's log line of the refused login, never for the answer.
    user: str | None = None


class Forbidden(KdbError):
    """Valid credentials without the right the operation needs."""


# --- Requests outside SQL ----------------------------------------------------------------


class BadRequest(KdbError):
    """A parameter, header or body that is wrong, unknown or out of range."""


class PayloadTooLarge(BadRequest):
    pass


class LineError(BadRequest):
    """A line of line-protocol data (POST /write) that cannot be read, with where it fails."""

    def __init__(self, line: int, column: int, message: str) -> None:
        super().__init__(f"line {line}, column {column}: {message}")
        self.line = line
        self.column = column

    def details(self) -> dict[str, object]:
        return {"position": {"line": self.line, "column": self.column}}


class MalformedRequest(BadRequest):
    """An HTTP request whose framing cannot be read; it is answered and the connection ends."""


class RequestTargetTooLong(MalformedRequest):
    """A request line past the server's limit."""


class RequestHeadTooLarge(MalformedRequest):
    """Header fields past the server's limit, in number or in bytes."""


class RequestBodyTooLarge(MalformedRequest, PayloadTooLarge):
    """A body announced or sent past `max_body_mb`."""


class RequestTimeout(BadRequest):
    """A request that did not arrive whole in time after its first byte; the connection ends."""


class ProtocolError(BadRequest):
    """A PostgreSQL-protocol message that breaks the protocol; the connection then ends."""


class NotificationsOverflow(ProtocolError):
    """A connection left more notifications unread than it may hold: it is ended."""


class MalformedMessage(ProtocolError):
    """Bytes that do not decode as the message their type byte names."""


class UnexpectedMessage(ProtocolError):
    """A message the connection's state does not allow (a Bind before the startup, say)."""


class MessageTooLarge(ProtocolError):
    """A message longer than the server takes."""


class UnknownPreparedStatement(ProtocolError):
    """A Bind or Describe naming a prepared statement that does not exist."""


class UnknownPortal(ProtocolError):
    """A Describe or Execute naming a portal that does not exist."""


class PreparedStatementExists(ProtocolError):
    """A Parse naming a prepared statement that exists (close it first)."""


class PortalExists(ProtocolError):
    """A Bind naming a portal that exists (close it first)."""


class UnsupportedProtocol(ProtocolError):
    """A protocol version or a request (GSSAPI, replication) this server does not serve."""


class Gone(KdbError):
    """A position older than the log still kept."""

    def __init__(self, message: str, gone_before: int):
        super().__init__(message)
        self.gone_before = gone_before

    def details(self) -> dict[str, object]:
        return {"gone_before": self.gone_before}


# --- The server cannot take this now -----------------------------------------------------

# How long a caller refused for now is told to wait before asking again, in seconds (over
# HTTP its Retry-After), unless its refusal says otherwise.
RETRY_AFTER_SECONDS = 5


class TooManyRequests(KdbError):
    """Over a limit of what one caller may hold at once (open streams): the 429, with the
    seconds to wait before asking again."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(KdbError):
    """The documented 503: shutting down, or writes stopped after a disk failure."""


class TooManyConnections(Unavailable):
    """A connection past `max_connections` or `max_connections_per_address`, or met when the
    process has no file descriptor left: refused at once, before its request is read."""


class WritesStopped(Unavailable):
    pass


class MemoryFull(Unavailable):
    """A write that would take table data past the memory limit (`memory_mb`); nothing of it
    was written. Reads go on; a retry helps only once rows are deleted or the limit raised."""


# --- Storage: damage found while opening, or a disk that fails ----------------------------


class StorageError(KdbError):
    """Damage in the log or data files that recovery must not paper over, or a file the disk
    failed to write or read (the change it was for is not made): the documented 503."""


class CorruptLog(StorageError):
    def __init__(self, path: str, offset: int, reason: str, lost: str | None = None):
        # `lost`: the LSNs that moving the damaged part aside gives up, when that is a way on.
        way_on = "restore the data folder from a backup"
        if lost:
            way_on += (
                ", or run `refimpl check --data <folder> --cut-damaged-log` to move the damaged"
                f" part aside (which loses {lost})"
            )
        super().__init__(
            f"write-ahead log damaged in {path} at offset {offset}: {reason}; the database"
            f" does not open: {way_on}"
        )
        self.path = path
        self.offset = offset


class CorruptCheckpoint(StorageError):
    pass


class ConfigError(KdbError):
    """A bad setting in kdb.conf, the environment or a flag."""
