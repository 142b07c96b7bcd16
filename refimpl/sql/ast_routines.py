"""Statement objects of triggers and procedures (part of `refimpl.sql.ast`, which re-exports
every name here: use them as `ast.CreateTrigger`).

Expressions are `Expr` of `ast_base`, which `ast` re-exports; statements are `Statement`:
`ast` imports this module, so this one cannot name the kinds of statement `ast` defines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from refimpl.sql.ast_access import Statement
from refimpl.sql.ast_base import Expr


@dataclass(frozen=True, slots=True)
class CreateTrigger(Statement):
    """`CREATE [DEFINER = u] TRIGGER [IF NOT EXISTS] name [BEFORE|AFTER] INSERT | UPDATE [OF
    cols] | DELETE ON t [FOR EACH ROW] [WHEN expr] BEGIN stmt; ... END`.

    `timing` is BEFORE when the text names none (SQLite's default); `columns` are UPDATE OF's
    (empty: any column); `when` is an `ast.Expr` or None; `body` the statements, in order.
    `definer` is None as people write it; the logged form names the user whose rights the
    trigger runs with (MySQL's DEFINER clause).
    """

    name: str
    timing: str
    event: str
    table: str
    body: tuple[Statement, ...]
    columns: tuple[str, ...] = ()
    when: Expr | None = None
    if_not_exists: bool = False
    definer: str | None = None


@dataclass(frozen=True, slots=True)
class DropTrigger(Statement):
    name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class ShowTriggers(Statement):
    pass


@dataclass(frozen=True, slots=True)
class ProcedureParam:
    name: str
    type: str  # one of ast.TYPES


@dataclass(frozen=True, slots=True)
class CreateProcedure(Statement):
    """`CREATE [OR REPLACE] PROCEDURE p(name type, ...) LANGUAGE SQL AS $$ ... $$` or
    `... BEGIN ATOMIC stmt; ... END`.

    Exactly one of `body` (the statements of BEGIN ATOMIC) and `source` (the text between
    the `$$`, parsed when the statement runs) is set; `source_at` is the line and column of
    that text's first character in the script, so that its errors point into the script.
    """

    name: str
    params: tuple[ProcedureParam, ...]
    body: tuple[Statement, ...] | None = None
    source: str | None = None
    or_replace: bool = False
    source_at: tuple[int, int] = field(default=(1, 1), compare=False)


@dataclass(frozen=True, slots=True)
class DropProcedure(Statement):
    name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class Call(Statement):
    """`CALL p(arg, ...)`."""

    name: str
    args: tuple[Expr, ...] = ()


@dataclass(frozen=True, slots=True)
class ShowProcedures(Statement):
    pass
