"""A session: one caller's statements on one database, with its rights and transaction.

Sessions are cheap and not shared between threads. A statement outside BEGIN ... COMMIT
commits on its own. An explicit transaction holds the database's write lock from BEGIN to
COMMIT or ROLLBACK, so what it read stays what it writes over. SAVEPOINT marks a point of
it that ROLLBACK TO comes back to. An error inside a transaction rolls it back at once,
unless the session `keeps_failed` (the PostgreSQL protocol's): then the transaction stays
open and failed, refusing every statement but ROLLBACK, ROLLBACK TO a savepoint (which
resumes it) and COMMIT (which rolls it back). Statements a caller runs as one text
(`begin_text`, PostgreSQL's simple Query of several) are one implicit transaction.
"""

from __future__ import annotations

import functools
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from refimpl.engine import admission
from refimpl.engine.query import deadlines
from refimpl.engine.query.session_functions import SessionFunctions
from refimpl.engine.result import Result, message_result
from refimpl.engine.rights import Principal, Right
from refimpl.engine.statements import executor
from refimpl.engine.statements.context import (
    AccessRules,
    Catalog,
    FunctionTables,
    TableFunction,
)
from refimpl.engine.statements.cursor_state import Cursors
from refimpl.engine.statements.prepared_runs import ParsedHandlers, PreparedRun
from refimpl.engine.storage import values
from refimpl.engine.storage.table import Ident, Row, Table
from refimpl.engine.storage.transaction import Mark, Transaction
from refimpl.errors import (
    FailedTransaction,
    Forbidden,
    KdbError,
    NoActiveTransaction,
    NotAllowed,
    ParameterError,
    SqlError,
    StatementTimeout,
    StatementTooLarge,
    Unauthorized,
    UnknownSavepoint,
)
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached
from refimpl.sql.templates import Template, shared_parse, template_of

if TYPE_CHECKING:
    from refimpl.engine.storage.database import Database

T = TypeVar("T")

# Texts up to this many characters have their template remembered (`_known_template`),
# but for INSERTs: their texts carry new keys, seldom sent again, and would push out the rest.
TEMPLATE_TEXT_KEPT = 1024


@functools.lru_cache(maxsize=4096)
def _known_template(sql: str) -> Template | None:
    """`template_of(sql)`, remembered by the exact text: a client that sends the same text
    again (a point SELECT of a key read before, a dashboard's query) skips the scan. A
    template is a pure function of its text, and a run still checks its rights, its
    admission and its timeout; at most 4096 texts of at most TEMPLATE_TEXT_KEPT characters
    (a few megabytes) are kept."""
    return template_of(sql)


_NO_PLACE_IN_TIME = (
    "the statement waited for a place to run among the costly statements longer than the"
    " server's statement_timeout_ms; try again when the server is less busy, or raise the limit"
)


class Session:
    """Satisfies `StatementContext`: the handlers it runs see it through that Protocol.

    The instance that opens a session hands it what the session must not reach the instance
    for: the access control, the catalog of databases, the SQL function tables and the
    handlers of parsed statements.
    """

    def __init__(
        self,
        database: Database,
        principal: Principal,
        *,
        access: AccessRules,
        catalog: Catalog,
        functions: FunctionTables,
        handlers: ParsedHandlers,
        acknowledge_later: bool = False,
    ) -> None:
        self.access = access
        self._handlers = handlers
        self.catalog = catalog
        self._functions = functions
        self.database = database
        self.principal = principal
        self.transaction: Transaction | None = None
        # The open transaction is the implicit one of a text of several statements
        # (`begin_text`), which a BEGIN among them makes a block.
        self.implicit = False
        # With `keeps_failed`, an error inside a transaction leaves it open and `failed`.
        self.keeps_failed = False
        self.failed = False
        self._savepoints: list[tuple[str, Mark]] = []
        self.cursors = Cursors()
        # With `acknowledge_later`, a commit does not wait for its flush: the caller must
        # wait until `durable_needed` is durable before it acknowledges anything.
        self.acknowledge_later = acknowledge_later
        self.durable_needed = 0
        # Seconds a change waits for the database's write lock (PostgreSQL's lock_timeout,
        # a session's SET; 0: the statement timeout's), None: the server's lock_timeout_ms.
        self.lock_timeout: float | None = None
        # What else ends with the open transaction (a SET's undoing), told if it committed.
        self.transaction_ends: list[Callable[[bool], None]] = []
        # When the running statement must stop: set as each statement of `execute` starts
        # (its parse included), None between statements.
        self._deadline: float | None = None
        # The running statement's moment (microseconds since 1970), read from the clock the
        # first time the statement asks for it (most never do), beside the deadline of the
        # statement it is of (`statement_time`); and that of the open transaction block's
        # BEGIN, None outside one.
        self._statement_at: tuple[float | None, int] = (None, 0)
        self._transaction_at: int | None = None
        # The moment of the running text of several statements (`begin_text`): every one
        # of its statements' own.
        self._text_at: int | None = None
        # What makes this session's deadline known to its thread while a statement runs; it
        # names the session by a weak proxy, so that the two make no cycle (a session a
        # request is freed as its request ends, not by the collector).
        self._running = deadlines.running(weakref.proxy(self))

    # -- running SQL ---------------------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Result:
        """Run every statement of `sql`; the answer is the last statement's.

        `?` placeholders take `params` in order over the whole text. When statement i of
        several fails, its error carries `statement_index` i (1-based); an open transaction
        is rolled back and the statements before it that committed on their own stay.
        The statement timeout covers the parse and each statement; SQL longer than
        `max_sql_bytes` is refused before it is read.
        """
        self._check_size(sql)
        self._deadline = self._new_deadline()
        # One scan of the text finds its constants for both the admission's shape and the
        # shared parse; a large text is scanned only once it has its place.
        scanned = not params and len(sql) <= admission.LARGE_TEXT
        template: Template | None = None
        if scanned:
            kept = len(sql) <= TEMPLATE_TEXT_KEPT and sql.lstrip()[:6].upper() != "INSERT"
            template = _known_template(sql) if kept else template_of(sql)
        shape = hash(template.text) if template is not None else None
        # Outside a transaction no engine lock is held here: a costly text waits for a place
        # of its own (refimpl.engine.admission), and that wait counts against its timeout.
        if self.transaction is None and not admission.before_statements(sql, self._deadline, shape):
            self._deadline = None
            raise StatementTimeout(_NO_PLACE_IN_TIME)
        try:
            if not params and not scanned:
                template = template_of(sql)
            running = deadlines.enter(self._running)  # loops inside one value stop too
            try:
                return self._execute(sql, params, template)
            finally:
                deadlines.leave(running)
        finally:
            self._deadline = None

    def prepare(self, sql: str) -> PreparedRun | None:
        """`sql` read once for `run_prepared`, or None when it is not one statement of a
        kind a handler runs, or is longer than `max_sql_bytes` (`execute` then says why at
        each run). SqlSyntaxError as `execute` raises it."""
        try:
            self._check_size(sql)
        except StatementTooLarge:
            return None
        script = parse_cached(sql, self.deadline())
        if len(script.statements) != 1:
            return None
        statement = script.statements[0]
        try:
            handler = self._handlers.of(statement)  # shared by every run of its text
        except NotAllowed:
            return None
        shape = admission.statement_shape(sql)
        return PreparedRun(sql, script.sources[0], statement, script.param_count, shape, handler)

    def run_prepared(self, prepared: PreparedRun, params: Sequence[Any]) -> Result:
        """What `execute(prepared.sql, params)` answers, without reading its text again:
        the same rights checks, admission, statement timeout, durability and errors (a
        failed transaction, a wrong count of parameters: `execute` itself answers those)."""
        if self.failed or len(params) != prepared.param_count:
            return self.execute(prepared.sql, params)
        # `_new_deadline()`, written out: every run sets one.
        self._deadline = time.monotonic() + self.database.options.statement_timeout
        if self.transaction is None and not admission.before_statements(
            prepared.sql, self._deadline, prepared.shape
        ):
            self._deadline = None
            raise StatementTimeout(_NO_PLACE_IN_TIME)
        running = deadlines.enter(self._running)
        try:
            return self._run_one(prepared.statement, prepared.source, params, prepared.handler)
        finally:
            deadlines.leave(running)
            self._deadline = None

    def _run_one(
        self,
        statement: ast.Statement,
        source: str,
        params: Sequence[Any],
        handler: executor.Handler | None = None,
    ) -> Result:
        """One statement, not refused by a failed transaction, run by its `handler` (None:
        the one `ParsedHandlers` gives) as `_execute` runs each of several: a query's answer
        once what it may show is durable; an error, its handler's lookup's included, that
        rolls the open transaction back (or leaves it failed)."""
        try:
            if handler is None:
                handler = self._handlers.of(statement)
            result = handler(self, statement, source, params)
            if result.columns is not None:  # a query
                self.database.wait_visible()
        except KdbError:
            if self.transaction is not None:
                if self.keeps_failed:
                    self.failed = True
                else:
                    self.rollback()
            raise
        result.statements = 1
        return result

    def _check_size(self, sql: str) -> None:
        limit = self.database.options.max_sql_bytes
        # Encoding is needed only when the text might be too long (a character is at most 4
        # UTF-8 bytes).
        if len(sql) * 4 > limit and len(sql.encode("utf-8", "surrogatepass")) > limit:
            raise StatementTooLarge(
                f"the SQL text is {len(sql.encode('utf-8', 'surrogatepass'))} bytes, more than"
                f" the server's max_sql_bytes ({limit}); send fewer statements at once, put"
                " long lists of values in a table (POST /imp), or raise the limit"
            )

    def _execute(self, sql: str, params: Sequence[Any], template: Template | None) -> Result:
        shared = shared_parse(template, self._deadline) if template is not None else None
        sources: tuple[str, ...]
        if shared is not None and template is not None:
            # One statement, which takes the constants: its source is the text as written.
            (statement,) = shared.statements
            if not self.failed:
                return self._run_one(statement, sql.strip(), template.values)
            statements, sources, params = shared.statements, (sql.strip(),), template.values
        else:
            script = parse_cached(sql, self._deadline)
            statements, sources = script.statements, script.sources
            if not statements:
                raise SqlError("the query is empty; send a SQL statement")
            if script.param_count != len(params):
                raise ParameterError(
                    f"the statement has {script.param_count} ? placeholder(s) but"
                    f" {len(params)} parameter(s) were given"
                )
        count = len(statements)
        result: Result | None = None
        for index, statement in enumerate(statements):
            if index:
                self._deadline = self._new_deadline()
            try:
                if self.failed and not isinstance(statement, ast.Rollback | ast.RollbackTo):
                    if isinstance(statement, ast.Commit):
                        self.rollback()
                        result = message_result(sources[index], "transaction rolled back")
                        continue
                    raise FailedTransaction(
                        "current transaction is aborted, commands ignored until end of"
                        " transaction block; send ROLLBACK, or ROLLBACK TO a savepoint"
                    )
                handler = self._handlers.of(statement)
                result = handler(self, statement, sources[index], params)
                if result.columns is not None:  # a query
                    self.database.wait_visible()
            except KdbError as error:
                if self.transaction is not None:
                    if self.keeps_failed:
                        self.failed = True
                    else:
                        self.rollback()
                if count > 1:
                    error.statement_index = index + 1
                raise
        assert result is not None
        result.statements = count
        return result

    def insert_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> int:
        """Insert rows of Python values (TIMESTAMP: int micros or ISO text) as one statement.

        In an open transaction the rows join it; otherwise they commit on their own.
        """
        self.authorize(Right.WRITE, table)

        def run(txn: Transaction) -> int:
            return executor.insert_rows(self, txn, table, columns, rows)

        return self.write(run)

    def load_rows(self, table: str, rows: values.TypedRows) -> int | None:
        """New rows inserted as a bulk load committing on its own (`Database.load_rows`:
        prepared while other writers commit), acknowledged as this session's commits are:
        the count; None in an open transaction or when they cannot load so (nothing
        changed: insert them the ordinary way). The caller has checked the right to write."""
        if self.transaction is not None:
            return None
        loaded = self.database.load_rows(table, rows)
        if loaded is None:
            return None
        count, lsn = loaded
        if self.acknowledge_later:
            self.durable_needed = max(self.durable_needed, lsn)
        else:
            self.database.wait_durable(lsn)
        return count

    # -- transactions --------------------------------------------------------------------

    def write(self, run: Callable[[Transaction], T]) -> T:
        """Run a change in the open transaction, or in one that commits when it ends."""
        if self.transaction is not None:
            return run(self.transaction)
        database = self.database
        database.acquire_write(lock_timeout=self.lock_timeout)
        lsn = None
        try:
            txn = Transaction(database.tables)
            result = run(txn)
            lsn = database.commit_locked(txn)
        finally:
            database.release_write()
        self._committed(lsn, txn)
        return result

    def insert_new_row(
        self, table: str, make: Callable[[Table, T], tuple[Ident, Row]], made_of: T
    ) -> bool:
        """A one-row INSERT committing on its own without a transaction's overlay: under the
        write lock, `make(committed table, made_of)` gives the row and its identity, new to
        the table (its errors are the statement's: nothing changed). True once committed,
        acknowledged as `write`'s commits are; False, nothing done, in an open transaction,
        for a table unknown, with secondary indexes (their UNIQUE checks are the
        transaction's) or DEDUP, or in a database with triggers: the caller then goes
        through `write`."""
        if self.transaction is not None:
            return False
        database = self.database
        key = table.lower()
        # `acquire_write` and `release_write`, their common case written out: most often the
        # write lock is free (a call each fewer a commit).
        write_lock = database.write_lock
        if not write_lock.acquire(False):
            database.acquire_write(lock_timeout=self.lock_timeout)
        try:
            committed = database.tables.get(key)
            if (
                committed is None
                or committed.secondary
                or committed.schema.dedup_key
                or database.settings.get("triggers")
            ):
                return False
            ident, row = make(committed, made_of)
            lsn = database.commit_new_row(key, committed.schema.name, committed, ident, row)
        finally:
            write_lock.release()
        if self.acknowledge_later:
            if lsn > self.durable_needed:
                self.durable_needed = lsn
        else:
            database.wait_durable(lsn)
        return True

    def begin(self) -> None:
        """BEGIN. Inside a text's implicit transaction, that transaction becomes the block,
        with what its statements did so far, as PostgreSQL's BEGIN turns its implicit one."""
        if self.implicit:
            self.implicit = False
            return
        self.database.acquire_write(lock_timeout=self.lock_timeout)
        self.transaction = Transaction(self.database.tables)
        self.failed = False
        self._transaction_at = self.statement_time()  # BEGIN's moment, as PostgreSQL's

    def commit(self) -> None:
        txn = self.transaction
        assert txn is not None
        database = self.database
        lsn = None
        try:
            lsn = database.commit_locked(txn)
        finally:
            self._end_transaction(committed=True)
            database.release_write()
        self._committed(lsn, txn)

    def _committed(self, lsn: int | None, txn: Transaction) -> None:
        if lsn is not None:
            if self.acknowledge_later:
                self.durable_needed = max(self.durable_needed, lsn)
            else:
                self.database.wait_durable(lsn)
        for action in txn.after_commit:
            action()

    def is_durable(self) -> bool:
        """True when every commit of this session is on disk: with `acknowledge_later`,
        everything it answered may now be acknowledged."""
        return self.durable_needed <= self.database.log.durable_lsn

    def wait_durable(self) -> None:
        """Block until every commit of this session is on disk (its group commit led or
        joined); raises WritesStopped when the log failed, and then nothing may be
        acknowledged."""
        if not self.is_durable():
            self.database.wait_durable(self.durable_needed)

    def rollback(self) -> None:
        if self.transaction is None:
            return
        self._end_transaction(committed=False)
        self.database.release_write()

    def _end_transaction(self, committed: bool) -> None:
        self.transaction = None
        self.implicit = False
        self._transaction_at = None
        self.failed = False
        self._savepoints.clear()
        self.cursors.transaction_ended(committed)
        if self.transaction_ends:
            ends, self.transaction_ends = self.transaction_ends, []
            for end in ends:
                end(committed)

    def savepoint(self, name: str) -> None:
        """SAVEPOINT: mark the open transaction's state under `name` (a name given again
        hides the older mark until this one is released)."""
        txn = self._open("SAVEPOINT")
        self._savepoints.append((name.lower(), txn.mark()))

    def release_savepoint(self, name: str) -> None:
        """RELEASE: forget the savepoint and every one made after it; changes stay."""
        self._open("RELEASE SAVEPOINT")
        del self._savepoints[self._savepoint_at(name) :]

    def rollback_to(self, name: str) -> None:
        """ROLLBACK TO: undo what the transaction did since the savepoint, which stays (the
        later ones go), and resume a failed transaction."""
        txn = self._open("ROLLBACK TO SAVEPOINT")
        at = self._savepoint_at(name)
        del self._savepoints[at + 1 :]
        txn.rollback_to(self._savepoints[at][1])
        self.failed = False

    def _open(self, what: str) -> Transaction:
        if self.transaction is None or self.implicit:
            raise NoActiveTransaction(f"{what} can only be used in transaction blocks; BEGIN first")
        return self.transaction

    def _savepoint_at(self, name: str) -> int:
        key = name.lower()
        for at in range(len(self._savepoints) - 1, -1, -1):
            if self._savepoints[at][0] == key:
                return at
        raise UnknownSavepoint(f'savepoint "{name}" does not exist')

    # -- a text of several statements, as one transaction -----------------------------

    def begin_text(self) -> None:
        """Several statements sent as one text start (the PostgreSQL protocol's simple
        Query of several), run one by one by the caller: until `end_text`, they share one
        moment, as PostgreSQL gives them all the message's, and those outside a block run
        in an implicit transaction (`in_text`), so an error undoes them all."""
        self._text_at = time.time_ns() // 1000

    def in_text(self, statement: ast.Statement | None) -> None:
        """Before each statement of the text (None: one of the caller's own, a session
        setting or a notification, which begins the transaction as a change does): outside a
        transaction, the implicit one begins (again after a COMMIT or ROLLBACK among them),
        but not for a query: a read leaves nothing an error would have to undo, so the
        queries before the text's first change run on their own and a text of queries
        never takes the write lock, never holding writers off (each reads what is
        committed when it runs, as PostgreSQL's statements do at READ COMMITTED). Inside
        the transaction, a COMMIT or ROLLBACK ends it, a BEGIN makes it a block (`begin`),
        a SAVEPOINT is refused and so is a statement that cannot run inside a transaction."""
        if self.transaction is None and not isinstance(statement, ast.Query):
            self.begin()
            self.implicit = True

    def end_text(self, committed: bool) -> None:
        """The text ended: its implicit transaction commits, or is rolled back when one of
        its statements failed (`committed` False); a block its BEGIN opened stays open."""
        self._text_at = None
        if self.implicit:
            if committed:
                self.commit()
            else:
                self.rollback()

    def close(self) -> None:
        """End the session; an open transaction is rolled back."""
        self.rollback()

    def deadline(self) -> float:
        """When the running statement must stop (the server's statement_timeout).

        Within `execute`, the deadline set when the statement started, so that parsing and
        planning count; outside it (a live query's re-run, say), one from now.
        """
        if self._deadline is not None:
            return self._deadline
        return self._new_deadline()

    def statement_deadline(self) -> float | None:
        """The running statement's deadline; None outside `execute`
        (`refimpl.engine.query.deadlines`)."""
        return self._deadline

    def _new_deadline(self) -> float:
        return time.monotonic() + self.database.options.statement_timeout

    # -- the clock -----------------------------------------------------------------------

    def transaction_time(self) -> int:
        """now()'s moment, microseconds since 1970: that of the open transaction block's
        BEGIN, the same for each of its statements; outside a block, the statement's own
        (each statement is its own transaction), `statement_time()`."""
        at = self._transaction_at
        return self.statement_time() if at is None else at

    def statement_time(self) -> int:
        """statement_timestamp()'s moment: the running statement's, one for all it asks
        (the clock is read when it first asks), or the running text's (`begin_text`);
        outside `execute`, the clock's."""
        if self._text_at is not None:
            return self._text_at
        deadline = self._deadline
        if deadline is None:  # between statements (a live query's re-run)
            return time.time_ns() // 1000
        # Each statement sets a deadline of its own, a new float: the moment kept beside
        # this one's is this statement's (the pair holds the float, so no later deadline
        # can be another object at its address). No statement pays for a moment it never
        # asks for.
        of, at = self._statement_at
        if of is not deadline:
            at = time.time_ns() // 1000
            self._statement_at = (deadline, at)
        return at

    # -- rights --------------------------------------------------------------------------

    def authorize(
        self, right: Right, table: str | None = None, database: str | None = None
    ) -> None:
        """Raise Forbidden (Unauthorized for anonymous callers) unless the right is held."""
        principal = self.principal
        if principal.is_admin:
            return  # the admin user holds every right everywhere (see `access.checks`)
        self.access.check(principal, database or self.database.name, right, table)

    def can_read(self, table: str) -> bool:
        return self.access.allowed(self.principal, self.database.name, Right.READ, table)

    def require_admin_user(self, what: str) -> None:
        if self.principal.is_admin:
            return
        if self.principal.name is None:
            raise Unauthorized(f"{what} needs the admin user; send its token")
        raise Forbidden(f"{what} needs the admin user; {self.principal.describe()} is not")

    # -- extension points ----------------------------------------------------------------

    def sql_functions(self) -> SessionFunctions:
        """Scalar SQL functions that need the session (kdb_rev, say), run for this one; the
        instance's one table, not copied."""
        return SessionFunctions.bound(self._functions.scalar, self)

    def table_functions(self) -> dict[str, TableFunction]:
        """Table functions usable in FROM (changes, say)."""
        return self._functions.tables
