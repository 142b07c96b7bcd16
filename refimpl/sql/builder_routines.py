"""Reductions of triggers and procedures (`RoutineBuilder` is a part of
`refimpl.sql.builder.Builder`)."""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer, v_args

from refimpl.sql import ast
from refimpl.sql.builder_ddl import error_at


@v_args(inline=True)
class RoutineBuilder(Transformer):
    # --- triggers ----------------------------------------------------------------------

    def create_trigger(
        self,
        definer: str | None,
        if_not_exists: bool | None,
        name: str,
        timing: str | None,
        event: tuple[str, tuple[str, ...]],
        table: str,
        each_row: bool | None,
        when: ast.Expr | None,
        *body: ast.Statement,
    ) -> ast.CreateTrigger:
        kind, columns = event
        return ast.CreateTrigger(
            name,
            timing or "BEFORE",
            kind,
            table,
            body,
            columns,
            when,
            if_not_exists is not None,
            definer,
        )

    def trigger_timing(self, token: Token) -> str:
        return token.upper()

    def definer(self, user: str) -> str:
        return user

    def trigger_insert(self) -> tuple[str, tuple[str, ...]]:
        return "INSERT", ()

    def trigger_update(self, columns: tuple[str, ...] | None) -> tuple[str, tuple[str, ...]]:
        return "UPDATE", columns or ()

    def trigger_delete(self) -> tuple[str, tuple[str, ...]]:
        return "DELETE", ()

    def for_each_row(self) -> bool:
        return True

    def trigger_when(self, expr: ast.Expr) -> ast.Expr:
        return expr

    def drop_trigger(self, if_exists: bool | None, name: str) -> ast.DropTrigger:
        return ast.DropTrigger(name, if_exists is not None)

    def show_triggers(self) -> ast.ShowTriggers:
        return ast.ShowTriggers()

    def routine_step(self, statement: ast.Statement, semicolon: Token) -> ast.Statement:
        return statement

    # --- procedures --------------------------------------------------------------------

    def create_procedure(
        self,
        or_replace: bool | None,
        name: str,
        params: tuple[ast.ProcedureParam, ...] | None,
        body: ast.CreateProcedure,
    ) -> ast.CreateProcedure:
        return ast.CreateProcedure(
            name, params or (), body.body, body.source, or_replace is not None, body.source_at
        )

    def or_replace(self) -> bool:
        return True

    def procedure_params(self, *params: ast.ProcedureParam) -> tuple[ast.ProcedureParam, ...]:
        return params

    def procedure_param(self, name: str, type_: str) -> ast.ProcedureParam:
        return ast.ProcedureParam(name, type_)

    def procedure_source(self, language: None, source: Token) -> ast.CreateProcedure:
        # The name and parameters are filled in by create_procedure.
        if source.type == "DOLLAR_STRING":
            text, skip = source[2:-2], 2
        else:
            text, skip = source[1:-1].replace("''", "'"), 1
        line, column = source.line, source.column
        assert line is not None and column is not None  # LALR tokens carry their place
        return ast.CreateProcedure("", (), source=text, source_at=(line, column + skip))

    def procedure_source_first(self, source: Token, language: None) -> ast.CreateProcedure:
        return self.procedure_source(language, source)

    def procedure_atomic(self, language: None, *body: ast.Statement) -> ast.CreateProcedure:
        return ast.CreateProcedure("", (), body=body)

    def language(self, keyword: Token, name: str) -> None:
        if name.lower() != "sql":
            raise error_at(
                keyword,
                f"LANGUAGE {name} is not supported: a procedure's body is"
                " SQL statements (LANGUAGE SQL)",
            )

    def drop_procedure(self, if_exists: bool | None, name: str) -> ast.DropProcedure:
        return ast.DropProcedure(name, if_exists is not None)

    def call_procedure(self, name: str, args: tuple[Any, ...] | None) -> ast.Call:
        return ast.Call(name, args or ())

    def show_procedures(self) -> ast.ShowProcedures:
        return ast.ShowProcedures()
