"""Compiled expressions and the type rules operators and functions share.

A `Compiled` is a function from a row to a value plus the SQL type of that value; a `Scope`
says what names mean while compiling.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from refimpl.engine.storage import values
from refimpl.errors import AmbiguousColumn, InvalidValue, SqlError, TypeMismatch, UnknownColumn
from refimpl.sql import ast

Evaluator = Callable[[Sequence[Any]], Any]

# The comparison operators on two values, neither NULL (a caller handles NULL first).
COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@dataclass(frozen=True, slots=True)
class Compiled:
    fn: Evaluator
    type: str
    constant: bool = False


@dataclass(slots=True)
class ScopeColumn:
    """A column a name can mean. `hidden`: reachable only with its table's name (the columns
    of a join's USING are, each side's own; the bare name means the merged one). `pg_type`:
    PostgreSQL's type of it where `type` does not say it (`Column.pg_type`: a subquery's,
    view's or WITH table's column of `current_user`), `pg_typmod` its type modifier."""

    index: int
    type: str
    name: str
    qualifier: str | None = None
    hidden: bool = False
    pg_type: str | None = None
    pg_typmod: int = -1


class SubqueryPlanner(Protocol):
    """Plans the queries inside an expression (given by whoever runs the statement)."""

    def prepare(self, query: ast.Query, outer: OuterLink) -> PreparedQuery: ...

    def semi_join(self, query: ast.Query, outer: OuterLink) -> SemiJoin | None:
        """EXISTS of `query` as a set of keys, when it only correlates by equalities."""
        ...

    def prepared_columns(self, query: ast.Query) -> list[Any] | None:
        """The columns `query` answered as `prepare` prepared it, None when it did not."""
        ...


class PreparedQuery(Protocol):
    """A subquery ready to run: its columns, and its rows for the outer row now in `outer`."""

    columns: list[Any]

    def rows(self) -> list[tuple]: ...


@dataclass(frozen=True, slots=True)
class SemiJoin:
    """`EXISTS (SELECT ... WHERE inner_a = outer_a AND ... AND rest)` run once: the values of
    the inner sides of the equalities over the rows that pass `rest`, and the outer sides
    compiled in the outer scope. EXISTS is then: the outer row's key is among `keys`."""

    outer_keys: list[Compiled]
    keys: frozenset[Any]


@dataclass(slots=True)
class OuterLink:
    """How a subquery reads the query around it: `row` holds the outer row being evaluated,
    and `used` says whether the subquery read it at all (is correlated)."""

    scope: Scope
    row: list[Any] = field(default_factory=lambda: [()])
    used: bool = False


@dataclass
class Scope:
    """What names mean while compiling: columns by name, and precomputed nodes.

    `slots` maps whole expression nodes (GROUP BY keys, aggregate calls) to a position in
    the row, so that after grouping `sum(x) + 1` reads `sum(x)` from its slot.
    """

    columns: list[ScopeColumn]
    qualifiers: frozenset[str] = frozenset()
    params: Sequence[Any] = ()
    slots: dict[ast.Expr, tuple[int, str]] = field(default_factory=dict)
    now: int = 0
    functions: Mapping[str, Callable[..., Compiled]] = field(default_factory=dict)
    clause: str = "the query"
    # Subqueries in expressions: who plans them, and the query this one is inside of.
    subqueries: SubqueryPlanner | None = None
    outer: OuterLink | None = None

    def over(self, columns: list[ScopeColumn], clause: str) -> Scope:
        """A scope of `columns` (their qualifiers as the names of tables) for `clause`, with
        this one's parameters, time, functions, subqueries and outer query; no slots."""
        return Scope(
            columns=columns,
            qualifiers=frozenset(c.qualifier for c in columns if c.qualifier),
            params=self.params,
            now=self.now,
            functions=self.functions,
            clause=clause,
            subqueries=self.subqueries,
            outer=self.outer,
        )

    def reader(self, ref: ast.ColumnRef) -> Compiled:
        """The column `ref` names, compiled: a function of the row, and its type.

        A name this scope lacks is looked up in the enclosing query's (a correlated
        subquery), whose current row the function then reads. Such a value is a constant
        of the subquery: a subquery is compiled again for each outer row it runs for, so
        its planner may use the value (a key lookup for `WHERE id = outer.x`).
        """
        try:
            column = self.resolve(ref)
        except UnknownColumn:
            link = self.outer
            if link is None:
                raise
            outer = link.scope.reader(ref)
            link.used = True
            outer_fn, cell = outer.fn, link.row
            return Compiled(lambda row: outer_fn(cell[0]), outer.type, constant=True)
        index = column.index
        return Compiled(lambda row: row[index], column.type)

    def resolve(self, ref: ast.ColumnRef) -> ScopeColumn:
        lowered = ref.name.lower()
        if ref.table is not None and ref.table.lower() not in self.qualifiers:
            raise UnknownColumn(f"{ref.table}.{ref.name}")
        matches = [c for c in self.columns if c.name.lower() == lowered]
        if ref.table is not None:
            qualified = [c for c in matches if c.qualifier in (None, ref.table.lower())]
            matches = qualified
        else:
            matches = [c for c in matches if not c.hidden]
        if not matches:
            raise UnknownColumn(ref.name)
        if len(matches) > 1:
            raise AmbiguousColumn(f"column name '{ref.name}' is ambiguous")
        return matches[0]


def is_numeric(type_: str) -> bool:
    return type_ in values.NUMERIC_TYPES or type_ == "NULL"


def numeric_result(left: str, right: str) -> str:
    if "DOUBLE" in (left, right):
        return "DOUBLE"
    if "BIGINT" in (left, right) or "OID" in (left, right):
        return "BIGINT"  # an OID computes as a BIGINT (PostgreSQL has no oid arithmetic)
    if left == "NULL" and right == "NULL":
        return "INT"
    return "INT"


def family(type_: str) -> str:
    if type_ in values.NUMERIC_TYPES:
        return "number"
    if type_ in values.TEXT_TYPES:
        return "text"
    return type_


class _Unequal:
    """The value of a constant that no value of the other side can equal (a text that is no
    number, next to a number; a BLOB next to anything but a BLOB): `=` is FALSE, `<>` TRUE."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return id(self)


_UNEQUAL = _Unequal()
# Families whose values SQLite compares without error; a constant of one never equals a value
# of another (its affinity rules read only a text that is a number as a number).
_SQLITE_FAMILIES = frozenset({"number", "text", "BLOB"})


def comparable(
    left: Compiled, right: Compiled, what: str, equality: bool = False
) -> tuple[Compiled, Compiled]:
    """Make two operands comparable: text constants next to a TIMESTAMP become times, and
    text constants of numbers next to a number become numbers (as SQLite's numeric affinity
    reads `x = '5'`, and PostgreSQL `oid = '16384'`, which psql sends).

    With `equality` (`=`, `<>`, IN), a text constant that is no number next to a number, or
    a BLOB constant next to a number or text, becomes a value equal to nothing (SQLite's
    answer in every case); other operands of different families are a TypeMismatch."""
    if left.type == "TIMESTAMP" and right.type in values.TEXT_TYPES and right.constant:
        right = as_timestamp_constant(right)
    elif right.type == "TIMESTAMP" and left.type in values.TEXT_TYPES and left.constant:
        left = as_timestamp_constant(left)
    elif _reads_as_number(right, left):
        right = _as_number_constant(right)
    elif _reads_as_number(left, right):
        left = _as_number_constant(left)
    if "NULL" in (left.type, right.type) or family(left.type) == family(right.type):
        return left, right
    if equality and {family(left.type), family(right.type)} <= _SQLITE_FAMILIES:
        if _never_equal(right, left):
            return left, Compiled(lambda row: _UNEQUAL, left.type, constant=True)
        if _never_equal(left, right):
            return Compiled(lambda row: _UNEQUAL, right.type, constant=True), right
    raise TypeMismatch(f"cannot compare {left.type} with {right.type} in {what}")


def _reads_as_number(side: Compiled, other: Compiled) -> bool:
    """True when `side` is a text constant next to a number. Also when the number is a
    constant (where SQLite gives neither affinity and `'5' = 5` is FALSE): a constant here
    may be an outer query's column, which has one."""
    return side.constant and side.type in values.TEXT_TYPES and other.type in values.NUMERIC_TYPES


def _never_equal(side: Compiled, other: Compiled) -> bool:
    """True when the constant `side` equals no value of `other`'s family, whatever it is."""
    if not side.constant or family(other.type) == "BLOB":
        return False
    return side.type == "BLOB" or (
        side.type in values.TEXT_TYPES and family(other.type) == "number"
    )


# A number's text as SQLite reads it (its affinity, sum() of text): sign, digits, exponent.
NUMBER_TEXT = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*")
# More characters than any number of a BIGINT or DOUBLE needs: longer text is no number.
LONGEST_NUMBER_TEXT = 400


def _as_number_constant(compiled: Compiled) -> Compiled:
    """The text constant as the number it writes (an integer when it has no fraction or
    exponent and fits a BIGINT, else a DOUBLE); unchanged when it is no number's text."""
    text = compiled.fn(())
    if text is None or len(text) > LONGEST_NUMBER_TEXT or not NUMBER_TEXT.fullmatch(text):
        return compiled
    number: int | float
    try:
        number = int(text)
    except ValueError:
        number = float(text)
    if isinstance(number, int) and not values.BIGINT_MIN <= number <= values.BIGINT_MAX:
        number = float(number)
    if not math.isfinite(number):
        return compiled
    return Compiled(lambda row: number, values.type_of_value(number), constant=True)


def timestamps_of_text(given: list[Compiled]) -> list[Compiled]:
    """`given` with each text constant read as a TIMESTAMP where another value is one, as
    PostgreSQL reads an `unknown` among timestamps (a CASE's or coalesce's values)."""
    if all(g.type != "TIMESTAMP" for g in given):
        return given
    return [
        as_timestamp_constant(g) if g.constant and g.type in values.TEXT_TYPES else g for g in given
    ]


def as_timestamp_constant(compiled: Compiled) -> Compiled:
    text = compiled.fn(())
    micros = None if text is None else values.parse_timestamp(text)
    return Compiled(lambda row: micros, "TIMESTAMP", constant=True)


def refuse_blob(type_: str, what: str) -> None:
    """A BLOB (an X'...' literal) is only compared: no column type holds one, and nothing
    else takes one."""
    if type_ == "BLOB":
        raise TypeMismatch(
            f"{what} cannot take a BLOB (X'...'): there is no BLOB type; a"
            " BLOB literal can only be compared (=, <>, <, IN, ...)"
        )


def require_boolean(compiled: Compiled, what: str) -> None:
    if compiled.type not in ("BOOLEAN", "NULL"):
        raise TypeMismatch(f"{what} needs BOOLEAN operands, not {compiled.type}")


def common_type(types: list[str], what: str) -> str:
    known = [t for t in types if t != "NULL"]
    if not known:
        return "NULL"
    if len(set(known)) == 1:  # OIDs stay OIDs (a CASE, coalesce or UNION of them)
        return known[0]
    if all(is_numeric(t) for t in known):
        result = known[0]
        for other in known[1:]:
            result = numeric_result(result, other)
        return result
    if all(t in values.TEXT_TYPES for t in known):
        return "STRING"
    raise TypeMismatch(f"{what} mixes values of types {', '.join(sorted(set(known)))}")


def table_scope(schema: Any, params: Sequence[Any], clause: str, now: int = 0) -> Scope:
    """The scope of expressions over one table's rows (UPDATE SET, WHERE, DROP PARTITION)."""
    return Scope(
        columns=[ScopeColumn(i, c.type, c.name) for i, c in enumerate(schema.columns)],
        qualifiers=frozenset({schema.name.lower()}),
        params=params,
        now=now,
        clause=clause,
    )


def conjuncts(expr: ast.Expr | None) -> list[ast.Expr]:
    """The terms of a condition's top-level ANDs, in order (none for no condition)."""
    if expr is None:
        return []
    if isinstance(expr, ast.Binary) and expr.op == "AND":
        return conjuncts(expr.left) + conjuncts(expr.right)
    return [expr]


def row_count(expr: ast.Expr | None, evaluate: Callable[[ast.Expr], Any], what: str) -> int | None:
    """The value of a LIMIT or OFFSET (`what`, its expression `expr`) as `evaluate` computes
    it: None when there is none or it is NULL, else a whole number of 0 or more
    (InvalidValue otherwise; SqlError when it names a column)."""
    if expr is None:
        return None
    try:
        value = evaluate(expr)
    except UnknownColumn:
        raise SqlError(f"{what} takes a number or a ? parameter, not a column") from None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidValue(f"{what} must be a whole number of 0 or more, not {value!r}")
    return value
