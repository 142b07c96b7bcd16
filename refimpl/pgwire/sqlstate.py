"""The one map of refimpl's errors to SQLSTATE codes, and errors as ErrorResponse messages.

Most specific class first: the first class an error is an instance of gives its code
(spec/pgwire.md shows the same table). The message is the same sentence `/exec` answers.
"""

from __future__ import annotations

from refimpl import errors
from refimpl.pgwire.messages import ErrorResponse

SQLSTATE: tuple[tuple[type[errors.KdbError], str], ...] = (
    (errors.SqlSyntaxError, "42601"),  # syntax_error
    (errors.UnknownTable, "42P01"),  # undefined_table
    (errors.TableExists, "42P07"),  # duplicate_table
    (errors.UnknownColumn, "42703"),  # undefined_column
    (errors.AmbiguousColumn, "42702"),  # ambiguous_column
    (errors.DuplicateColumn, "42701"),  # duplicate_column
    (errors.TypeMismatch, "42804"),  # datatype_mismatch
    (errors.DuplicateKey, "23505"),  # unique_violation
    (errors.NotNullViolation, "23502"),  # not_null_violation
    (errors.InvalidValue, "22000"),  # data_exception
    (errors.CopyFormatError, "22P04"),  # bad_copy_file_format (binary COPY's framing)
    (errors.CopyError, "22000"),  # COPY data (or options) that cannot be read
    (errors.NotAllowed, "0A000"),  # feature_not_supported
    (errors.ParameterError, "08P01"),  # protocol_violation (a parameter count off)
    (errors.FailedTransaction, "25P02"),  # in_failed_sql_transaction
    (errors.UnknownSavepoint, "3B001"),  # invalid_savepoint_specification
    (errors.NoActiveTransaction, "25P01"),  # no_active_sql_transaction
    (errors.InsideTransactionBlock, "25001"),  # active_sql_transaction
    (errors.UnknownCursor, "34000"),  # invalid_cursor_name
    (errors.TransactionError, "25000"),  # invalid_transaction_state
    (errors.UnknownFunction, "42883"),  # undefined_function
    (errors.UnknownSetting, "42704"),  # undefined_object
    (errors.StatementCancelled, "57014"),  # query_canceled
    (errors.CopyFailed, "57014"),
    (errors.StatementTimeout, "57014"),
    (errors.LockTimeout, "55P03"),  # lock_not_available
    (errors.ResultTooLarge, "54000"),  # program_limit_exceeded
    (errors.StatementTooLarge, "54000"),
    (errors.DatabaseExists, "42P04"),  # duplicate_database
    (errors.UserError, "42704"),  # undefined_object
    (errors.SubqueryRows, "21000"),  # cardinality_violation
    (errors.SqlError, "42000"),  # syntax_error_or_access_rule_violation
    (errors.UnknownDatabase, "3D000"),  # invalid_catalog_name
    (errors.NotFound, "42704"),
    (errors.Unauthorized, "28000"),  # invalid_authorization_specification
    (errors.Forbidden, "42501"),  # insufficient_privilege
    (errors.UnknownPreparedStatement, "26000"),  # invalid_sql_statement_name
    (errors.UnknownPortal, "34000"),  # invalid_cursor_name
    (errors.PreparedStatementExists, "42P05"),  # duplicate_prepared_statement
    (errors.PortalExists, "42P03"),  # duplicate_cursor
    (errors.MessageTooLarge, "54000"),
    (errors.UnsupportedProtocol, "0A000"),
    (errors.NotificationsOverflow, "53400"),  # configuration_limit_exceeded
    (errors.ProtocolError, "08P01"),  # protocol_violation
    (errors.PayloadTooLarge, "54000"),
    (errors.BadRequest, "22023"),  # invalid_parameter_value
    (errors.Gone, "55000"),  # object_not_in_prerequisite_state
    (errors.TooManyRequests, "53400"),  # configuration_limit_exceeded (open streams)
    (errors.WritesStopped, "58030"),  # io_error
    (errors.MemoryFull, "53200"),  # out_of_memory
    (errors.TooManyConnections, "53300"),  # too_many_connections
    (errors.Unavailable, "57P03"),  # cannot_connect_now
    (errors.CorruptLog, "XX001"),  # data_corrupted
    (errors.CorruptCheckpoint, "XX001"),
    (errors.StorageError, "58030"),
    (errors.ConfigError, "F0000"),  # config_file_error
    (errors.KdbError, "XX000"),  # internal_error
)

# Codes of conditions this layer meets itself, not raised as refimpl errors.
TOO_MANY_CONNECTIONS = "53300"
ADMIN_SHUTDOWN = "57P01"
INVALID_PASSWORD = "28P01"
INTERNAL = "XX000"


def sqlstate_of(error: errors.KdbError) -> str:
    for cls, code in SQLSTATE:
        if isinstance(error, cls):
            return code
    return INTERNAL


def error_response(
    error: errors.KdbError, text: str | None = None, offset: int = 0
) -> ErrorResponse:
    """The ErrorResponse of `error`; with the query `text` (a statement of which starts at
    `offset`), a syntax error's line and column become PostgreSQL's character position."""
    position = None
    line = getattr(error, "line", None)
    column = getattr(error, "column", None)
    if text is not None and isinstance(line, int) and isinstance(column, int):
        position = _position(text, offset, line, column)
    return ErrorResponse(sqlstate_of(error), error.message, position=position)


def _position(text: str, offset: int, line: int, column: int) -> int:
    at = offset
    for _ in range(line - 1):
        at = text.index("\n", at) + 1 if "\n" in text[at:] else at
    return at + column
