"""What trigger and procedure bodies run in: the writing transaction, as someone.

A `RoutineContext` is a `StatementContext` over another (the session, or the trigger or
procedure that fired or called this one): the same database, deadline and functions, but its
writes go straight into the transaction it was given (they commit with the statement that
caused them, under its LSN) and its rights are those of whom the body runs as (a trigger's
definer; a procedure's caller). Transaction statements are refused inside. Routines nest at
most `MAX_DEPTH` deep: a trigger that writes its own table fires itself, and without a WHEN
that stops it, that ends in RoutineDepth, which rolls the whole statement back.

`bind_names` rewrites a body once so that its names of values (a trigger's NEW.c and OLD.c,
a procedure's parameters) are `?` parameters: each run passes the values as parameters,
and the statements themselves are compiled as any other.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import fields, is_dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from refimpl.engine.query.session_functions import SessionFunctions
from refimpl.engine.result import Result, message_result
from refimpl.engine.rights import Principal, Right
from refimpl.engine.storage import ddl, values
from refimpl.errors import (
    Forbidden,
    KdbError,
    NotAllowed,
    RoutineDepth,
    StatementTimeout,
    UnknownRoutine,
)
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import (
        AccessRules,
        Catalog,
        StatementContext,
        TableFunction,
    )
    from refimpl.engine.statements.cursor_state import Cursors
    from refimpl.engine.storage.database import Database
    from refimpl.engine.storage.table import Ident, Row, Table
    from refimpl.engine.storage.transaction import Transaction

T = TypeVar("T")

# How deep triggers and CALLs may nest inside one statement.
MAX_DEPTH = 32

# How a routine runs one statement of its body (the executor's dispatch, handed down so that
# this layer does not import the executor that imports it).
RunStatement = Callable[["StatementContext", ast.Statement, str, Sequence[Any]], Result]


def depth_of(context: StatementContext) -> int:
    return context.depth if isinstance(context, RoutineContext) else 0


class RoutineContext:
    """Satisfies `StatementContext` for the statements of a trigger or procedure body."""

    def __init__(
        self, outer: StatementContext, txn: Transaction, principal: Principal, what: str
    ) -> None:
        self._outer = outer
        self._txn = txn
        self._principal = principal
        self.depth = depth_of(outer) + 1
        if self.depth > MAX_DEPTH:
            raise RoutineDepth(
                f"{what} would nest {self.depth} triggers and CALLs deep, more than the"
                f" {MAX_DEPTH} a statement may; a trigger that writes its own table fires"
                " itself: give it a WHEN that stops it"
            )

    @property
    def outer(self) -> StatementContext:
        """The context whose statement fired or called this routine."""
        return self._outer

    @property
    def database(self) -> Database:
        return self._outer.database

    @property
    def principal(self) -> Principal:
        return self._principal

    @property
    def transaction(self) -> Transaction:
        return self._txn

    @property
    def access(self) -> AccessRules:
        return self._outer.access

    @property
    def catalog(self) -> Catalog:
        return self._outer.catalog

    def authorize(
        self, right: Right, table: str | None = None, database: str | None = None
    ) -> None:
        self.access.check(self._principal, database or self.database.name, right, table)

    def can_read(self, table: str) -> bool:
        return self.access.allowed(self._principal, self.database.name, Right.READ, table)

    def require_admin_user(self, what: str) -> None:
        if not self._principal.is_admin:
            raise Forbidden(f"{what} needs the admin user; {self._principal.describe()} is not")

    def write(self, run: Callable[[Transaction], T]) -> T:
        return run(self._txn)

    def load_rows(self, table: str, rows: values.TypedRows) -> int | None:
        return None  # its rows join the caller's transaction

    def insert_new_row(
        self, table: str, make: Callable[[Table, T], tuple[Ident, Row]], made_of: T
    ) -> bool:
        return False  # its row joins the caller's transaction

    def begin(self) -> None:
        raise NotAllowed(
            "a trigger or procedure runs inside its caller's transaction; it cannot begin one"
        )

    commit = rollback = begin
    implicit = False  # a body's statements are its caller's, never a text's

    def savepoint(self, name: str) -> None:
        raise NotAllowed(
            "a trigger or procedure runs inside its caller's transaction; it cannot make,"
            " release or roll back to a savepoint"
        )

    release_savepoint = rollback_to = savepoint

    @property
    def cursors(self) -> Cursors:
        raise NotAllowed("a trigger or procedure cannot declare, fetch from or close a cursor")

    def deadline(self) -> float:
        return self._outer.deadline()

    def transaction_time(self) -> int:
        return self._outer.transaction_time()  # a body runs in its caller's transaction

    def statement_time(self) -> int:
        return self._outer.statement_time()  # and within the statement that fired it

    def sql_functions(self) -> SessionFunctions:
        # The same table, each call run for this context: in a body current_user() and the
        # rights of kdb_rev are whom it runs as (a trigger's definer, a procedure's caller),
        # in its SELECTs, VALUES and WHERE alike.
        return SessionFunctions(self._outer.sql_functions().table, lambda: self)

    def table_functions(self) -> dict[str, TableFunction]:
        return self._outer.table_functions()


def session_principal(context: StatementContext) -> Principal:
    """The user of the session whose statement runs, however deep in triggers and CALLs
    (PostgreSQL's session_user: a trigger runs as its definer, not as this user)."""
    while isinstance(context, RoutineContext):
        context = context.outer
    return context.principal


def routines_of(context: StatementContext, kind: str) -> dict[str, str]:
    """The database's routines of `kind` ("trigger" or "procedure"): lower-case name ->
    canonical CREATE text."""
    stored: dict[str, str] = context.database.settings.get(f"{kind}s") or {}
    return stored


def drop_routine(
    context: StatementContext,
    kind: str,
    name: str,
    if_exists: bool,
    logged: ast.Statement,
    text: str,
) -> Result:
    """DROP TRIGGER and DROP PROCEDURE: ADMIN right; `logged` (the DROP statement) goes
    into the database's log; a missing name is UnknownRoutine, or only a message with
    IF EXISTS."""
    context.authorize(Right.ADMIN)

    def run(txn: Transaction) -> Result:
        if name.lower() not in routines_of(context, kind):
            if if_exists:
                return message_result(text, f"{kind} '{name}' does not exist")
            raise UnknownRoutine(kind, name, unknown_hint(kind))
        txn.database_changes.append(ddl.canonical_sql(logged))
        return message_result(text, f"{kind} '{name}' dropped")

    return context.write(run)


def unknown_hint(kind: str) -> str:
    """What UnknownRoutine of `kind` adds: the SHOW statement that lists them."""
    return f"; SHOW {kind.upper()}S lists the {kind}s"


def run_body(
    context: RoutineContext,
    body: Sequence[ast.Statement],
    params: Sequence[Any],
    run_statement: RunStatement,
) -> None:
    """Run a body's statements in order; StatementTimeout once the caller's deadline passed
    (checked between statements too: a body of many short ones is bounded as well)."""
    deadline = context.deadline()
    for statement in body:
        if time.monotonic() > deadline:
            raise StatementTimeout.ran_too_long()
        run_statement(context, statement, "", params)


def name_error(error: KdbError, what: str) -> None:
    """Tell an error of a body's statement as the routine's: `what` (a trigger or procedure,
    as the message names it) leads the message, once, at the innermost routine."""
    if not error.message.startswith(("trigger '", "procedure '")):
        error.message = f"{what}: {error.message}"
        error.args = (error.message,)


def as_parameter(value: Any, column_type: str) -> Any:
    """A stored value as a `?` parameter of its own type (a TIMESTAMP is a datetime)."""
    if column_type == "TIMESTAMP" and value is not None:
        return values.timestamp_to_datetime(value)
    return value


def bind_names(node: Any, binding: Callable[[ast.ColumnRef], int | None]) -> Any:
    """`node` with every column reference that `binding` maps to an index replaced by the
    parameter of that index; the same object when none is (frozen nodes are shared)."""
    if isinstance(node, ast.ColumnRef):
        index = binding(node)
        return node if index is None else ast.Param(index)
    if isinstance(node, tuple):
        items = tuple(bind_names(item, binding) for item in node)
        return node if all(a is b for a, b in zip(items, node, strict=True)) else items
    if not is_dataclass(node) or isinstance(node, type):
        return node
    changed = {}
    for spec in fields(node):
        if not spec.init:
            continue
        value = getattr(node, spec.name)
        bound = bind_names(value, binding)
        if bound is not value:
            changed[spec.name] = bound
    if not changed:
        return node
    kwargs = {spec.name: getattr(node, spec.name) for spec in fields(node) if spec.init}
    kwargs.update(changed)
    return type(node)(**kwargs)


def has_params(nodes: Sequence[object]) -> bool:
    """Whether any of the statements or expressions holds a `?`."""
    return any(isinstance(node, ast.Param) for node in ast.walk(tuple(nodes)))
