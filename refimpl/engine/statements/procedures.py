"""Procedures (spec/sources.md, "Procedures"): CREATE [OR REPLACE] PROCEDURE, DROP
PROCEDURE, SHOW PROCEDURES and CALL.

A procedure is schema of its database, kept and logged as triggers are (its canonical text,
the body always in the BEGIN ATOMIC form). A CALL is one transaction: the caller's open one,
or one of its own that commits once, under one LSN, when the whole body has run; an error
anywhere in the body rolls it all back. The body runs with the caller's rights (PostgreSQL's
SECURITY INVOKER) and within the CALL's statement timeout. Its parameters are written by
name in the body (or `p.name`); a name that is a parameter's means the parameter, so a
column of the same name is written with its table (`t.name`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refimpl.engine.query.compiled import Scope
from refimpl.engine.query.expressions import compile_expression
from refimpl.engine.result import Column, Result, message_result, query_result
from refimpl.engine.rights import Right
from refimpl.engine.statements.routines import (
    RoutineContext,
    RunStatement,
    as_parameter,
    bind_names,
    drop_routine,
    has_params,
    name_error,
    routines_of,
    run_body,
    unknown_hint,
)
from refimpl.engine.storage import ddl, values
from refimpl.engine.storage.transaction import Transaction
from refimpl.errors import (
    KdbError,
    NotAllowed,
    RoutineExists,
    SqlError,
    SqlSyntaxError,
    TypeMismatch,
    UnknownRoutine,
)
from refimpl.sql import ast
from refimpl.sql.parser import parse, parse_cached

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

# What a body may hold: data, not schema or transactions (a CALL is one transaction of rows).
_BODY_STATEMENTS = (
    ast.Select,
    ast.Values,
    ast.SetOperation,
    ast.WithQuery,
    ast.Insert,
    ast.Update,
    ast.Delete,
    ast.Call,
)


def procedures_of(context: StatementContext) -> dict[str, str]:
    """The database's procedures: lower-case name -> canonical CREATE PROCEDURE text."""
    return routines_of(context, "procedure")


def _signature(params: Sequence[ast.ProcedureParam]) -> str:
    return ", ".join(f"{p.name} {p.type}" for p in params)


# -- CREATE, DROP, SHOW ------------------------------------------------------------------


def _create_procedure(
    context: StatementContext, statement: ast.CreateProcedure, text: str, params: Sequence[Any]
) -> Result:
    context.authorize(Right.ADMIN)
    name = statement.name
    body = statement.body if statement.body is not None else _parse_source(context, statement)
    if not body:
        raise SqlError(f"procedure '{name}' has no statements; write at least one")
    for step in body:
        if not isinstance(step, _BODY_STATEMENTS):
            raise NotAllowed(
                f"a procedure's body holds queries, INSERT, UPDATE, DELETE and CALL, not"
                f" {ddl.canonical_sql(step).split(' ', 1)[0]} statements; run those on their own"
            )
    if has_params(body):
        raise SqlError("a procedure's body takes no ? parameters; name its parameters instead")
    seen: set[str] = set()
    for param in statement.params:
        if param.name.lower() in seen:
            raise SqlError(f"procedure '{name}' names its parameter '{param.name}' twice")
        seen.add(param.name.lower())

    def run(txn: Transaction) -> Result:
        replaced = name.lower() in procedures_of(context)
        if replaced and not statement.or_replace:
            raise RoutineExists(
                "procedure", name, "use CREATE OR REPLACE PROCEDURE, or DROP PROCEDURE first"
            )
        stored = ast.CreateProcedure(name, statement.params, body=tuple(body))
        txn.database_changes.append(ddl.canonical_sql(stored))
        return message_result(text, f"procedure '{name}' {'replaced' if replaced else 'created'}")

    return context.write(run)


def _parse_source(
    context: StatementContext, statement: ast.CreateProcedure
) -> tuple[ast.Statement, ...]:
    """The statements between the `$$`; a syntax error points into the script."""
    assert statement.source is not None
    try:
        return parse(statement.source, context.deadline()).statements
    except SqlSyntaxError as error:
        line, column = error.line or 1, error.column or 1
        at_line, at_column = statement.source_at
        if line == 1:
            column += at_column - 1
        line += at_line - 1
        reason = error.message.split(": ", 1)[-1]
        raise SqlSyntaxError(f"line {line}, column {column}: {reason}", line, column) from None


def _drop_procedure(
    context: StatementContext, statement: ast.DropProcedure, text: str, params: Sequence[Any]
) -> Result:
    name = statement.name
    return drop_routine(
        context, "procedure", name, statement.if_exists, ast.DropProcedure(name), text
    )


_SHOW_COLUMNS = [
    Column("procedure", "STRING"),
    Column("parameters", "STRING"),
    Column("statement", "STRING"),
]


def _show_procedures(
    context: StatementContext, statement: ast.ShowProcedures, text: str, params: Sequence[Any]
) -> Result:
    context.authorize(Right.READ)
    rows = []
    for stored in procedures_of(context).values():
        procedure = parse_cached(stored).statements[0]
        assert isinstance(procedure, ast.CreateProcedure)
        rows.append((procedure.name, _signature(procedure.params), stored))
    rows.sort(key=lambda row: row[0].lower())
    return query_result(text, _SHOW_COLUMNS, rows)


HANDLERS: dict[type, Callable[..., Result]] = {
    ast.CreateProcedure: _create_procedure,
    ast.DropProcedure: _drop_procedure,
    ast.ShowProcedures: _show_procedures,
}

# -- CALL --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Procedure:
    """A procedure with its parameter names bound: parameter i is the `?` of index i."""

    name: str
    params: tuple[ast.ProcedureParam, ...]
    body: tuple[ast.Statement, ...]


@functools.lru_cache(maxsize=256)
def _bound(text: str) -> Procedure:
    statement = parse_cached(text).statements[0]
    assert isinstance(statement, ast.CreateProcedure) and statement.body is not None
    positions = {p.name.lower(): index for index, p in enumerate(statement.params)}
    own = statement.name.lower()

    def binding(ref: ast.ColumnRef) -> int | None:
        if ref.table is not None and ref.table.lower() != own:
            return None
        return positions.get(ref.name.lower())

    return Procedure(
        statement.name,
        statement.params,
        tuple(bind_names(step, binding) for step in statement.body),
    )


def call(
    context: StatementContext,
    statement: ast.Call,
    text: str,
    params: Sequence[Any],
    run_statement: RunStatement,
) -> Result:
    """CALL: the arguments converted to the parameters' types, then the body in one
    transaction (the caller's open one, or its own that commits once at the end)."""
    context.authorize(Right.READ)
    stored = procedures_of(context).get(statement.name.lower())
    if stored is None:
        raise UnknownRoutine("procedure", statement.name, unknown_hint("procedure"))
    procedure = _bound(stored)
    if len(statement.args) != len(procedure.params):
        raise SqlError(
            f"procedure '{procedure.name}' takes {len(procedure.params)} argument(s)"
            f" ({_signature(procedure.params)}) but the CALL gives {len(statement.args)}"
        )
    scope = Scope(
        columns=[],
        params=params,
        now=context.transaction_time(),
        clause="CALL",
        functions=context.sql_functions(),
    )
    arguments = []
    for number, (arg, param) in enumerate(zip(statement.args, procedure.params, strict=True), 1):
        value = compile_expression(arg, scope).fn(())
        try:
            value = values.coerce(value, param.type, param.name)
        except TypeMismatch:
            raise TypeMismatch(
                f"procedure '{procedure.name}': argument {number} ({param.name} {param.type})"
                f" cannot take {values.type_of_value(value)} value {values.shown(value)}"
            ) from None
        arguments.append(as_parameter(value, param.type))

    def run(txn: Transaction) -> Result:
        what = f"procedure '{procedure.name}'"
        routine = RoutineContext(context, txn, context.principal, what)
        try:
            run_body(routine, procedure.body, arguments, run_statement)
        except KdbError as error:
            name_error(error, what)
            raise
        return message_result(text, f"procedure '{procedure.name}' called")

    return context.write(run)
