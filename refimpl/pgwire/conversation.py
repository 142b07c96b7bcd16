"""The answers of one logged-in connection: simple and extended queries on an engine session.

A statement runs as it would over `/exec` (the same session calls, the same answers and
error sentences); what differs is the protocol's shape: each statement of a simple query is
answered on its own, all of them one transaction (`implicit_blocks`), prepared statements
and portals live until closed, and the transaction status follows PostgreSQL: an error inside
BEGIN ... leaves the transaction failed ('E'), open but refusing every later statement
until the client sends ROLLBACK (or COMMIT, which then rolls back) or ROLLBACK TO a
savepoint, which resumes it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

from refimpl.engine.result import Column, Result, message_result, query_result
from refimpl.engine.session import Session
from refimpl.engine.statements.prepared_runs import PreparedRun
from refimpl.errors import (
    AnswersMoreThanOnce,
    FailedTransaction,
    KdbError,
    NotAllowed,
    ParameterError,
    PortalExists,
    PreparedStatementExists,
    ProtocolError,
    SqlSyntaxError,
)
from refimpl.pgwire import copy_flow, setting_commands, sqlstate, types
from refimpl.pgwire import messages as m
from refimpl.pgwire.implicit_blocks import run_as_one
from refimpl.pgwire.notifications import STATEMENTS, Inbox, pg_notify_call
from refimpl.pgwire.param_types import param_types, table_column_types
from refimpl.pgwire.portals import (
    Plan,
    Portal,
    Prepared,
    check_result_type,
    move_portal,
    portal_named,
    prepared_named,
    result_type_of,
)
from refimpl.pgwire.quick_runs import BIND_COMPLETE as _BIND_COMPLETE
from refimpl.pgwire.quick_runs import NO_DATA as _NO_DATA
from refimpl.pgwire.quick_runs import QuickRun
from refimpl.pgwire.run_messages import BindHead
from refimpl.pgwire.session_settings import SessionSettings, recognise
from refimpl.pgwire.setting_commands import SETTING_TAGS, run_setting
from refimpl.pgwire.sqltext import Piece, split
from refimpl.pgwire.tags import command_tag, notices
from refimpl.pgwire.types import RowShape, kept_shape
from refimpl.pgwire.types import formats as _formats
from refimpl.pgwire.types import row_description as _row_description
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached
from refimpl.sql.printer import to_sql
from refimpl.sql.templates import templated

SUBSCRIBE_SERVED_AT = "GET /api/subscribe?query=SUBSCRIBE SELECT ..."  # spec: pgwire
# The statements a prepared statement may run as the engine's prepared run (`PreparedRun`):
# those `_run` hands to the session as they are.
_PREPARED_RUNS = (ast.Select, ast.Insert, ast.Update, ast.Delete)


# Sent after every query: one message of each status, made once; so are a run's others.
_READY = {status: m.ReadyForQuery(status) for status in "ITE"}
_READY_BYTES = {status: ready.encode() for status, ready in _READY.items()}
_BOUND = (_BIND_COMPLETE,)  # what a Bind answered


class Conversation:
    """Answers the messages of one connection after its startup; one thread at a time."""

    def __init__(
        self,
        session: Session,
        settings: SessionSettings,
        wire: copy_flow.Wire,
        check_right: Callable[[], None],
    ) -> None:
        """`check_right()` raises Forbidden once the user holds no right in the database
        any more: every statement is checked, so a REVOKE reaches open connections."""
        self.session = session
        session.keeps_failed = True  # ROLLBACK TO a savepoint may resume a failed transaction
        self._check_right = check_right
        self.settings = settings
        self.wire = wire  # what a COPY sends and reads while it runs
        self.failed = False  # in a transaction an error ended: refuse until ROLLBACK
        self._prepared: dict[str, Prepared] = {}
        self._portals: dict[str, Portal] = {}
        self.inbox = Inbox(session)  # LISTEN and NOTIFY; `attach`ed at the login
        # The runs of the statement run last, while no other message came (`run_known`).
        self.quick: QuickRun | None = None
        # That run's unnamed portal, made a Portal when a message may ask for it (`_settle`).
        self._unnamed: tuple[QuickRun, tuple[object, ...], Result] | None = None
        # The shape of the simple query's rows sent last, kept for the next of its columns.
        self._shape: RowShape | None = None
        self.idle_since = 0.0  # when its last ReadyForQuery in a transaction went out, or 0

    @property
    def status(self) -> str:
        if self.failed:
            return "E"
        return "T" if self.session.transaction is not None else "I"

    def ready(self) -> list[m.ServerMessage]:
        """ReadyForQuery, after the ParameterStatus of settings a transaction gave back."""
        ready = _READY[self.ready_status()]
        if not self.settings.unreported:
            return [ready]
        return [*setting_commands.reported_after_end(self.settings), ready]

    def ready_status(self) -> str:
        """`status` as ReadyForQuery tells it; in a transaction, idle from now (`idle_since`)."""
        if self.failed:
            status = "E"
            self.settings.transaction_failed()
        elif self.session.transaction is None:
            return "I"  # no clock read outside a transaction
        else:
            status = "T"
        self.idle_since = time.monotonic()
        return status

    def close(self) -> None:
        """The connection ended: an open transaction is rolled back."""
        self.inbox.close()
        self.session.close()

    # -- dispatch ------------------------------------------------------------------------

    def answer(self, message: m.ClientMessage) -> list[m.ServerMessage]:
        """The answers to one message; an error becomes an ErrorResponse among them."""
        self.quick = None  # it may change what a quick run relies on
        self._settle()
        if isinstance(message, m.Query):
            return self.simple_query(message.text)
        if isinstance(message, m.Sync):
            return [*self.inbox.messages(self.status), *self.ready()]
        self.idle_since = 0.0  # no ReadyForQuery before its Sync: not idle (as PostgreSQL)
        if isinstance(message, m.Flush):
            return []
        try:
            return self._extended(message)
        except KdbError as error:
            self.fail_transaction()
            text = message.text if isinstance(message, m.Parse) else None
            return [sqlstate.error_response(error, text)]

    def runs_together(self, bind: m.Bind) -> bool:
        """Whether a run of `bind`'s statement (Bind, Describe, Execute, Sync arrived
        together) is answered at once by `answer_run`: a statement with the engine's
        prepared run (`Prepared.run`), which sends nothing while it runs (no COPY)."""
        prepared = self._prepared.get(bind.statement)
        return prepared is not None and prepared.run is not None

    def answer_run(self, bind: m.Bind, described: bool, max_rows: int) -> list[m.ServerMessage]:
        """The answers of a run of the unnamed portal (`runs_together`): what Bind, Describe
        of the portal (when `described`), Execute and Sync answer one by one, an error
        skipping the rest up to the Sync's ReadyForQuery."""
        self.quick = None
        self._settle()
        out: list[m.ServerMessage] = []
        try:
            portal = self._bind(bind)
            out.append(_BIND_COMPLETE)
            if described:
                out += self._describe_portal(bind.portal)
            out += self._execute(portal, max_rows)
        except KdbError as error:
            self.fail_transaction()
            out.append(sqlstate.error_response(error, None))
        out += self.inbox.messages(self.status)
        out += self.ready()
        return out

    def run_bytes(
        self, bind: m.Bind, described: bool, max_rows: int, head: BindHead
    ) -> bytes | list[m.ServerMessage] | None:
        """`answer_run` in one pass for the runs nearly every client sends (decoders chosen,
        all rows at once, no failed transaction): `run_known`'s answers, its next runs framed
        alike then being `quick`'s; None, nothing done, for any other run (`answer_run`'s).
        `head`: the head of `bind` (`run_messages.read_run`'s)."""
        self._settle()
        prepared = self._prepared.get(bind.statement)
        if prepared is None or self.failed or max_rows:
            return None
        quick = QuickRun.of(prepared, bind, described, head)
        return None if quick is None else self.run_known(quick, list(bind.params))

    def run_known(
        self, quick: QuickRun, values: list[bytes | None]
    ) -> bytes | list[m.ServerMessage]:
        """A run of `quick`'s statement with a Bind of `values` (the caller counts its
        CommandComplete), as `answer_run` answers it: its bytes; a failed run's answers as
        messages, `quick` then dropped. Until another message is answered, the runs framed
        as `quick.frame` are `quick`'s (`self.quick`)."""
        prepared = quick.prepared
        said: Sequence[m.ServerMessage] = ()  # what Bind and Describe answered, for an error
        params: tuple[object, ...] | None = None
        try:
            params = quick.params(values)
            said = _BOUND
            said = quick.said or quick.before_run()
            result = self._run_prepared(quick.run, params)
            columns = result.columns
            if columns is not quick.columns:  # the first run, or the table changed
                quick.shape(columns)
            if columns is None:
                out = quick.prefix + prepared.completion(result)[1]
            else:
                out = quick.prefix + quick.write(result.rows) + quick.tag(result)
        except KdbError as error:
            self.quick = None
            if params is not None:  # bound: the unnamed portal is this run's
                self._unnamed = None
                self._portals[""] = Portal(prepared, params, quick.result_formats)
            self.fail_transaction()
            error_answer = sqlstate.error_response(error, None)
            return [*said, error_answer, *self.inbox.messages(self.status), *self.ready()]
        self.quick = quick
        self._unnamed = (quick, params, result)
        status = self.ready_status()
        for note in self.inbox.messages(status):
            out += note.encode()
        return out + _READY_BYTES[status]

    def _settle(self) -> None:
        """The unnamed portal of the last `run_known`, kept as a Portal once a message that
        may ask for it comes (no run of the connection's makes one it does not need)."""
        unnamed = self._unnamed
        if unnamed is not None:
            self._unnamed = None
            quick, params, result = unnamed
            sent = len(result.rows) if result.is_query else 0
            portal = Portal(quick.prepared, params, quick.result_formats, result, sent)
            self._portals[""] = portal

    def fail_transaction(self) -> None:
        """An error inside BEGIN ... fails the transaction, as in PostgreSQL."""
        if self.session.transaction is not None:
            self.session.failed = True
            self.failed = True

    def _extended(self, message: m.ClientMessage) -> list[m.ServerMessage]:
        answer = _EXTENDED.get(type(message))
        if answer is None:
            raise ProtocolError(f"a {type(message).__name__} message is not answered here")
        return answer(self, message)

    def close_one(self, message: m.Close) -> list[m.ServerMessage]:
        table: dict = self._prepared if message.kind == "S" else self._portals
        table.pop(message.name, None)
        return [m.CloseComplete()]

    def function_call(self, message: m.FunctionCall) -> list[m.ServerMessage]:
        raise NotAllowed("the fast-path function call is not served; call it in a query")

    # -- the simple query protocol -------------------------------------------------------

    def simple_query(self, text: str) -> list[m.ServerMessage]:
        pieces = split(text)
        if not pieces:
            return [m.EmptyQueryResponse(), *self.ready()]
        out: list[m.ServerMessage] = []
        if len(pieces) > 1:
            run_as_one(self, pieces, text, out)
        else:
            try:
                self.answer_statement(self.plan(pieces[0]), out)
            except KdbError as error:
                self.fail_transaction()
                out.append(sqlstate.error_response(error, text, pieces[0].offset))
        out += self.inbox.messages(self.status)
        out += self.ready()
        return out

    def answer_statement(self, plan: Plan, out: list[m.ServerMessage]) -> None:
        """Run one statement of a simple query; its answers appended to `out`."""
        result, reported = self._run(plan, (), out)
        out.extend(reported)
        out.extend(notices(plan.statement, result))
        if result.is_query:
            assert result.columns is not None
            formats = [0] * len(result.columns)
            shape = self._shape = kept_shape(self._shape, result.columns, formats)
            out += [shape.description, shape.data_rows(result.rows)]
        out.append(m.CommandComplete(self._tag(plan, result)))

    # -- the extended protocol -----------------------------------------------------------

    def parse(self, message: m.Parse) -> list[m.ServerMessage]:
        if message.name and message.name in self._prepared:
            raise PreparedStatementExists(
                f'prepared statement "{message.name}" already exists; close it first'
            )
        pieces = split(message.text)
        if len(pieces) > 1:
            raise SqlSyntaxError("cannot insert multiple commands into a prepared statement")
        plan = self.plan(pieces[0]) if pieces else None
        prepared = Prepared(plan, message.param_types)
        prepared.answers_rows = plan is not None and plan.answers_rows
        if (
            plan is not None
            and plan.piece.params  # else `execute` finds the text's constants at each run
            and isinstance(plan.statement, _PREPARED_RUNS)
            and not pg_notify_call(plan.statement)
        ):
            prepared.run = self.session.prepare(plan.piece.text)
        self._prepared[message.name] = prepared
        return [m.ParseComplete()]

    def bind(self, message: m.Bind) -> list[m.ServerMessage]:
        self._bind(message)
        return [_BIND_COMPLETE]

    def _bind(self, message: m.Bind) -> Portal:
        """The portal `message` binds, kept under its name (errors as `bind` sends them)."""
        prepared = prepared_named(self._prepared, message.statement)
        if message.portal and message.portal in self._portals:
            raise PortalExists(f'portal "{message.portal}" already exists; close it first')
        oids = prepared.param_oids
        count = prepared.count
        sent = message.params
        if len(sent) != count:
            raise ParameterError(
                f"bind message supplies {len(sent)} parameters, but prepared"
                f' statement "{message.statement}" requires {count}'
            )
        codes = message.param_formats
        decoders = prepared.decoders.get(codes)
        if decoders is None:
            _formats(codes, count)  # a wrong count of codes is told before anything else
        if not prepared.inferred and any(sent[n - 1] is not None for n in prepared.untyped):
            # A value of no type is read as its place types it (node-postgres sends all so),
            # whether or not the client asked with a Describe.
            self._describe_params(prepared)
            decoders = None
        if decoders is None:
            # Each parameter's decoder is chosen once per format codes (and types known).
            decoders = prepared.decoders[codes] = types.ParamDecoders(
                oids, prepared.hints, codes, count
            )
        values = decoders.read(sent)
        if prepared.in_order:
            params = values
        else:
            numbers = prepared.plan.piece.params if prepared.plan else ()
            params = tuple(values[n - 1] for n in numbers)
        portal = self._portals[message.portal] = Portal(prepared, params, message.result_formats)
        return portal

    def describe(self, message: m.Describe) -> list[m.ServerMessage]:
        if message.kind == "S":
            prepared = prepared_named(self._prepared, message.name)
            oids = self._describe_params(prepared)
            columns = self._describe_columns(prepared)
            if columns is not None and prepared.result_type is None:
                prepared.result_type = result_type_of(columns)  # what the client now knows
            return [
                m.ParameterDescription(oids),
                _row_description(columns, [0] * len(columns)) if columns is not None else _NO_DATA,
            ]
        return self._describe_portal(message.name)

    def _describe_portal(self, name: str) -> list[m.ServerMessage]:
        if name and name not in self._portals:
            # A cursor DECLAREd in SQL is a portal of the same name (psycopg's named cursors
            # describe it so).
            cursor_columns = self.session.cursors.columns(name)
            return [_row_description(cursor_columns, [0] * len(cursor_columns))]
        portal = portal_named(self._portals, name)
        columns = portal.prepared.columns
        if columns is None and portal.prepared.answers_rows:
            portal.result = self._run_portal(portal)
            columns = portal.result.columns
        if columns is None:
            return [_NO_DATA]
        formats = _formats(portal.result_formats, len(columns))
        return [portal.prepared.row_shape(columns, formats).description]

    def execute(self, message: m.Execute) -> list[m.ServerMessage]:
        return self._execute(portal_named(self._portals, message.portal), message.max_rows)

    def _execute(self, portal: Portal, max_rows: int) -> list[m.ServerMessage]:
        plan = portal.prepared.plan
        if plan is None:
            return [m.EmptyQueryResponse()]
        out: list[m.ServerMessage] = []
        if portal.result is None:
            portal.result = self._run_portal(portal, out)
        result = portal.result
        if not result.is_query:
            if portal.prepared.run is not None:  # DML: no notice; its tag by its count alone
                return [*out, portal.prepared.completion(result)[0]]
            return [
                *out,
                *notices(plan.statement, result),
                m.CommandComplete(self._tag(plan, result)),
            ]
        assert result.columns is not None
        limit = max_rows if max_rows > 0 else len(result.rows)
        rows = result.rows[portal.sent : portal.sent + limit]
        portal.sent += len(rows)
        formats = _formats(portal.result_formats, len(result.columns))
        out.append(portal.prepared.row_shape(result.columns, formats).data_rows(rows))
        if portal.sent < len(result.rows):
            out.append(m.PortalSuspended())
        else:
            out.append(
                m.CommandComplete(
                    command_tag(plan.statement, result, len(rows))
                    if plan.statement
                    else self._tag(plan, result)
                )
            )
        return out

    def _run_portal(self, portal: Portal, out: list[m.ServerMessage] | None = None) -> Result:
        prepared = portal.prepared
        plan = prepared.plan
        assert plan is not None
        run = prepared.run
        if run is not None and not self.failed:
            result = self._run_prepared(run, portal.params)
        else:
            result, reported = self._run(plan, portal.params, out)
            if out is not None:
                out.extend(reported)
        if result.columns is not None and plan.kind != "Fetch":  # a FETCH answers its cursor's
            check_result_type(prepared, result.columns)
        return result

    def _run_prepared(self, run: PreparedRun, params: Sequence[object]) -> Result:
        """`_run` of a prepared SELECT, INSERT, UPDATE or DELETE outside a failed
        transaction, which none of `_run`'s other cases concern: the right checked, then
        straight to the engine's prepared run."""
        self._check_right()
        in_transaction = self.session.transaction is not None
        try:
            result = self.session.run_prepared(run, params)
        except KdbError:
            self.failed = in_transaction  # open and failed until ROLLBACK, as in `_run`
            raise
        self.failed = self.session.failed
        return result

    def _describe_params(self, prepared: Prepared) -> tuple[int, ...]:
        plan = prepared.plan
        numbers = plan.piece.params if plan else ()
        count = max(max(numbers, default=0), len(prepared.param_oids))
        if plan is not None and plan.statement is not None and numbers:
            prepared.inferred = True
            prepared.decoders.clear()  # chosen by the types now known
            by_index = param_types(plan.statement, self._column_types)
            for index, number in enumerate(numbers):
                if index in by_index:
                    prepared.hints.setdefault(number, by_index[index])
        oids = []
        for number in range(1, count + 1):
            given = prepared.param_oids[number - 1] if number <= len(prepared.param_oids) else 0
            oids.append(given or types.oid_of(prepared.hints.get(number)))
        return tuple(oids)

    def _describe_columns(self, prepared: Prepared) -> list[Column] | None:
        plan = prepared.plan
        if plan is None or not plan.answers_rows:
            return None
        if plan.kind == "Fetch":  # the columns of whichever cursor of that name is open
            return self._dry_run(plan, prepared).columns
        if prepared.columns is None:
            if plan.kind == "CreateToken":
                prepared.columns = [Column("token", "STRING")]
            elif pg_notify_call(plan.statement):  # described without sending it
                prepared.columns = [Column("pg_notify", "STRING")]
            else:
                prepared.columns = self._dry_run(plan, prepared).columns
        return prepared.columns

    def _dry_run(self, plan: Plan, prepared: Prepared) -> Result:
        """Run a query without side effects for its columns: LIMIT 0, typed stand-ins."""
        piece = plan.piece
        params = prepared.stand_ins()
        statement = plan.statement
        if plan.templated:
            statement = parse_cached(piece.text, self.session.deadline()).statements[0]
        if isinstance(statement, ast.Fetch):
            return query_result(piece.text, self.session.cursors.columns(statement.cursor), [])
        if isinstance(statement, ast.Insert | ast.Update | ast.Delete):
            # RETURNING's columns, without writing: the same items selected from the table.
            statement = ast.Select(statement.returning, ast.TableSource(statement.table))
            params, piece = (), Piece(piece.text, piece.offset, ())
        if isinstance(statement, ast.Select) and statement.limit is None:
            limited = dataclasses.replace(statement, limit=ast.Literal(0, "INT"))
            piece = Piece(to_sql(limited), piece.offset, piece.params)
        return self._run(Plan(piece, plan.setting, statement), params)[0]

    def _copied_columns(self, statement: ast.CopyFrom) -> int:
        return len(statement.columns or self._column_types(statement.table))

    def _column_types(self, table: str) -> dict[str, str]:
        return table_column_types(self.session.execute, table)

    # -- running one statement -----------------------------------------------------------

    def plan(self, piece: Piece) -> Plan:
        setting = recognise(piece.text)
        if setting is not None:
            return Plan(piece, setting=setting)
        deadline = self.session.deadline()
        # A client's own `$n` are parameters already; otherwise the constants of a point
        # SELECT or a row's INSERT make a new text each time, which would cost a whole parse.
        shared = templated(piece.text, deadline) if not piece.params else None
        script = shared.script if shared is not None else parse_cached(piece.text, deadline)
        if len(script.statements) != 1:
            raise SqlSyntaxError("cannot insert multiple commands into a prepared statement")
        statement = script.statements[0]
        if isinstance(statement, ast.Subscribe):
            raise AnswersMoreThanOnce("the PostgreSQL protocol", SUBSCRIBE_SERVED_AT)
        return Plan(piece, statement=statement, templated=shared is not None)

    def _run(
        self, plan: Plan, params: Sequence[object], before: list[m.ServerMessage] | None = None
    ) -> tuple[Result, list[m.ServerMessage]]:
        """The statement's result and the ParameterStatus messages a SET makes. `before`:
        the answers so far, which a COPY sends before its copy messages (and empties)."""
        if plan.kind == "Rollback" or self.failed and plan.kind == "Commit":
            self.inbox.rolled_back()  # its NOTIFYs are dropped with it
        ends = plan.kind in ("Commit", "Rollback")
        if self.failed and plan.kind != "RollbackTo":
            if not ends:
                raise FailedTransaction(
                    "current transaction is aborted, commands ignored until end of"
                    " transaction block; send ROLLBACK, or ROLLBACK TO a savepoint"
                )
            self.failed = False
            self.session.rollback()
            return message_result(plan.piece.text, "transaction rolled back"), []
        self._check_right()
        if plan.setting is not None:
            return run_setting(
                self.settings,
                plan.setting,
                self._prepared,
                self._portals,
                self.session,
            )
        in_transaction = self.session.transaction is not None
        before = [] if before is None else before
        statement = plan.statement
        if isinstance(statement, STATEMENTS) or pg_notify_call(statement):
            return self.inbox.run(statement, params), []
        if (
            isinstance(statement, ast.Fetch)
            and statement.move
            and statement.cursor in self._portals
        ):
            return move_portal(self._portals[statement.cursor], statement, self._run_portal), []
        try:
            if isinstance(statement, ast.CopyTo):
                return copy_flow.copy_out(self.session, plan.piece.text, self.wire, before), []
            if isinstance(statement, ast.CopyFrom) and statement.file is None:
                return copy_flow.copy_in(
                    self.session,
                    plan.piece.text,
                    self.wire,
                    lambda: self._copied_columns(statement),
                    before,
                ), []
            result = self.session.execute(plan.piece.text, params)
            if in_transaction:  # a savepoint marks the settings too
                setting_commands.after_savepoint(self.settings, self.session, statement)
            self.failed = self.session.failed
            return result, []
        except KdbError:
            # The transaction stays open and failed until ROLLBACK or ROLLBACK TO.
            self.failed = in_transaction or plan.kind == "Begin"
            raise

    def _tag(self, plan: Plan, result: Result) -> str:
        if plan.setting is not None:
            if plan.setting.verb == "DEALLOCATE" and plan.setting.name is None:
                return "DEALLOCATE ALL"
            return SETTING_TAGS[plan.setting.verb]
        if plan.kind == "Commit" and result.message == "transaction rolled back":
            return "ROLLBACK"
        assert plan.statement is not None
        return command_tag(plan.statement, result)


# The answer to each message of the extended protocol, by the message's type.
_EXTENDED: dict[type, Callable[..., list[m.ServerMessage]]] = {
    m.Parse: Conversation.parse, m.Bind: Conversation.bind, m.Describe: Conversation.describe,
    m.Execute: Conversation.execute, m.Close: Conversation.close_one,
    m.FunctionCall: Conversation.function_call,
}  # fmt: skip
