"""Subqueries in expressions: scalar `(SELECT ...)`, `EXISTS`, `IN (SELECT ...)`, `ANY`/`ALL`.

The scope's `SubqueryPlanner` (given by whoever runs the statement) prepares each subquery
once, with an `OuterLink` to the scope around it. A subquery that reads no column of the
outer query runs once, at its first use; a correlated one runs for each outer row, its answers
remembered by the outer values it read, so equal outer values run it once.

NULL rules (spec/queries.md): `x IN (q)` is TRUE when some row equals x, else NULL when x is
NULL or some row is NULL, else FALSE; `NOT IN` is its negation. `x op ANY (q)` is TRUE when
the comparison is TRUE for some row, `x op ALL (q)` when it is for every row (TRUE for no
rows); otherwise NULL when some comparison is NULL, else FALSE.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from refimpl.engine.query.arrays import array_of, array_text
from refimpl.engine.query.compiled import (
    COMPARE,
    Compiled,
    OuterLink,
    PreparedQuery,
    Scope,
    SemiJoin,
    comparable,
)
from refimpl.errors import SqlError, SubqueryRows
from refimpl.sql import ast

Compile = Callable[[ast.Expr, Scope], Compiled]

# A correlated subquery's answers are kept for this many distinct outer values at most.
_REMEMBERED = 4096


class _NullRow:
    """An outer row of NULLs, of any width: what a correlated subquery is checked with."""

    def __getitem__(self, index: int) -> None:
        return None


_NULL_ROW = _NullRow()


class _Answer:
    """The rows a subquery answered for one outer row, with their set of values for IN."""

    __slots__ = ("rows", "_members")

    def __init__(self, rows: list[tuple]) -> None:
        self.rows = rows
        self._members: tuple[frozenset[Any], bool] | None = None

    def members(self) -> tuple[frozenset[Any], bool]:
        """The first column's non-NULL values, and whether a NULL is among them."""
        if self._members is None:
            values = [row[0] for row in self.rows]
            self._members = (frozenset(v for v in values if v is not None), None in values)
        return self._members


class _Answers:
    """The answers of one prepared subquery, for the outer row being evaluated."""

    def __init__(self, prepared: PreparedQuery, link: OuterLink) -> None:
        self.prepared = prepared
        self.link = link
        self.remembered: dict[Any, _Answer] = {}
        # Run once now, as the statement is planned: its errors (an unknown column) show
        # even when no outer row comes, and a subquery that read no outer column (link.used
        # stays False) has its one answer.
        link.row[0] = _NULL_ROW
        first = _Answer(prepared.rows())
        self.once = None if link.used else first

    def answer(self, outer_row: Sequence[Any]) -> _Answer:
        if self.once is not None:
            return self.once
        try:
            key: Any = tuple((type(v), v) for v in outer_row)
            hash(key)
        except TypeError:
            key = None
        found = self.remembered.get(key) if key is not None else None
        if found is not None:
            return found
        self.link.row[0] = outer_row
        answer = _Answer(self.prepared.rows())
        if key is not None and len(self.remembered) < _REMEMBERED:
            self.remembered[key] = answer
        return answer

    def rows(self, outer_row: Sequence[Any]) -> list[tuple]:
        return self.answer(outer_row).rows


def _prepare(query: ast.Query, scope: Scope) -> tuple[_Answers, list[Any]]:
    if scope.subqueries is None:
        raise SqlError(f"subqueries are not allowed in {scope.clause}")
    link = OuterLink(scope)
    prepared = scope.subqueries.prepare(query, link)
    return _Answers(prepared, link), prepared.columns


def _one_column(columns: list[Any], what: str) -> Any:
    if len(columns) != 1:
        raise SqlError(f"the subquery of {what} must answer one column, not {len(columns)}")
    return columns[0]


def _scalar(expr: ast.ScalarSubquery, scope: Scope, compile_: Compile) -> Compiled:
    answers, columns = _prepare(expr.query, scope)
    column = _one_column(columns, "a value (SELECT ...)")

    def value(row: Sequence[Any]) -> Any:
        rows = answers.rows(row)
        if not rows:
            return None
        if len(rows) > 1:
            raise SubqueryRows(
                "more than one row returned by a subquery used as an expression (it answered"
                f" {len(rows)} rows); add a WHERE that picks one row, LIMIT 1, or an aggregate"
                " such as max()"
            )
        return rows[0][0]

    return Compiled(value, column.type)


def _array(expr: ast.ArraySubquery, scope: Scope, compile_: Compile) -> Compiled:
    answers, columns = _prepare(expr.query, scope)
    column = _one_column(columns, "ARRAY(SELECT ...)")
    return Compiled(
        lambda row: array_text([(r[0], column.type) for r in answers.rows(row)]),
        array_of([column.type]),
    )


def _exists(expr: ast.Exists, scope: Scope, compile_: Compile) -> Compiled:
    if scope.subqueries is not None:
        semi = scope.subqueries.semi_join(expr.query, OuterLink(scope))
        if semi is not None:
            return _semi_join(semi)
    answers, _ = _prepare(expr.query, scope)
    return Compiled(lambda row: bool(answers.rows(row)), "BOOLEAN")


def _semi_join(semi: SemiJoin) -> Compiled:
    """EXISTS as a hash lookup: the subquery ran once, not once per outer row."""
    keys = semi.keys
    fns = [key.fn for key in semi.outer_keys]
    if len(fns) == 1:
        only = fns[0]
        return Compiled(lambda row: (value := only(row)) is not None and value in keys, "BOOLEAN")

    def exists(row: Sequence[Any]) -> bool:
        key = tuple(fn(row) for fn in fns)
        return None not in key and key in keys

    return Compiled(exists, "BOOLEAN")


def _probe(operand: Compiled, column: Any, what: str, equality: bool) -> Compiled:
    """The operand made comparable with the subquery's column (types as for `=`, or for
    `<` when not an `equality`)."""
    other = Compiled(lambda row: None, column.type)
    return comparable(operand, other, what, equality)[0]


def _in_subquery(expr: ast.InSubquery, scope: Scope, compile_: Compile) -> Compiled:
    operand = compile_(expr.operand, scope)
    answers, columns = _prepare(expr.query, scope)
    fn = _probe(operand, _one_column(columns, "IN"), "IN", equality=True).fn
    negated = expr.negated

    def member_of(row: Sequence[Any]) -> Any:
        answer = answers.answer(row)
        value = fn(row)
        if value is None:
            return None if answer.rows else negated
        present, has_null = answer.members()
        if value in present:
            return not negated
        return None if has_null else negated

    return Compiled(member_of, "BOOLEAN")


def _quantified(expr: ast.Quantified, scope: Scope, compile_: Compile) -> Compiled:
    operand = compile_(expr.operand, scope)
    answers, columns = _prepare(expr.query, scope)
    what = f"{expr.op} {expr.quantifier}"
    fn = _probe(operand, _one_column(columns, what), what, expr.op in ("=", "<>")).fn
    compare = COMPARE[expr.op]
    every = expr.quantifier == "ALL"

    def quantified(row: Sequence[Any]) -> Any:
        value = fn(row)
        unknown = False
        for (candidate,) in answers.rows(row):
            if value is None or candidate is None:
                unknown = True
            elif compare(value, candidate) != every:
                return not every  # ANY: one TRUE decides; ALL: one FALSE does
        return None if unknown else every

    return Compiled(quantified, "BOOLEAN")


def subquery_handlers(compile_: Compile) -> dict[type, Callable[[Any, Scope], Compiled]]:
    """The expression handlers of the subquery nodes, compiling operands with `compile_`."""
    handlers: dict[type, Callable[[Any, Scope, Compile], Compiled]] = {
        ast.ScalarSubquery: _scalar,
        ast.Exists: _exists,
        ast.ArraySubquery: _array,
        ast.InSubquery: _in_subquery,
        ast.Quantified: _quantified,
    }

    def bound(
        handler: Callable[[Any, Scope, Compile], Compiled],
    ) -> Callable[[Any, Scope], Compiled]:
        return lambda expr, scope: handler(expr, scope, compile_)

    return {kind: bound(handler) for kind, handler in handlers.items()}


_SUBQUERIES = (ast.ScalarSubquery, ast.Exists, ast.InSubquery, ast.Quantified, ast.ArraySubquery)


def has_subquery(node: object) -> bool:
    """True when a subquery appears anywhere in `node` (a statement or an expression).

    Remembered per node: every run of a statement's text shares its parse, and each run asks
    this on its way to a point read, where walking the tree would cost more than the read."""
    try:
        return _remembered_has_subquery(node)
    except TypeError:  # a node holding a list is not hashable: walked each time
        return _walked_has_subquery(node)


def _walked_has_subquery(node: object) -> bool:
    return any(isinstance(item, _SUBQUERIES) for item in ast.walk(node))


_remembered_has_subquery = functools.lru_cache(maxsize=4096)(_walked_has_subquery)
