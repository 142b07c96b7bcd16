"""Relations: the rows of a FROM clause that is more than one table, and joins of them.

A `Relation` is a row source (`refimpl.engine.query.select.RowSource`) whose columns each
know the table (alias) they came from, so that `t.col`, `t.*` and an unqualified name that
only one table has all resolve. Joins are hash joins on the equalities of ON (or USING) that
compare a column expression of one side with one of the other; what else ON says is checked
on each pair found. Only a join without any such equality (CROSS JOIN, a comma, ON a < b)
pairs every row with every row, and it stops at the statement's deadline like a scan does.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import itemgetter
from typing import Any, TypeVar

from refimpl.engine import admission
from refimpl.engine.query.compiled import Compiled, Scope, ScopeColumn, comparable, conjuncts
from refimpl.engine.result import Column
from refimpl.engine.storage.access_hints import AccessHints
from refimpl.errors import SqlError, StatementTimeout, TypeMismatch, UnknownColumn
from refimpl.sql import ast

Row = Sequence[Any]
T = TypeVar("T")
_CHECK_ROWS = 4096  # rows between two looks at a statement's deadline (`bounded`)
Compile = Callable[[ast.Expr, Scope], Compiled]

# The merged column of a USING belongs to no table: `t.id` names t's own.
_NO_TABLE = ""


@dataclass
class Relation:
    """Rows with columns that know their table; a row source for `run_select`.

    `produce` makes the rows each time they are read (a join reads its sides once).
    `star` lists the positions `*` shows, in order; `plan` says how a join runs. A table's
    relation has `key`: its key columns' positions and a lookup of a row by their values,
    which a join on the whole key uses instead of reading the table.
    """

    scope_columns: list[ScopeColumn]
    produce: Callable[[], Iterable[Row]]
    star: list[int] = field(default_factory=list)
    qualifier: str | None = None
    schema: Any = None
    plan: JoinPlan | None = None
    key: KeyLookup | None = None

    def __post_init__(self) -> None:
        if not self.star:
            self.star = [c.index for c in self.scope_columns if not c.hidden]

    # Made once a relation: a compile reads them several times (its scope, its stars, each
    # qualified name), and a relation's columns never change once it is made.
    @functools.cached_property
    def columns(self) -> list[Column]:
        return [Column(c.name, c.type, None, c.pg_type, c.pg_typmod) for c in self.scope_columns]

    @functools.cached_property
    def qualifiers(self) -> frozenset[str]:
        return frozenset(c.qualifier for c in self.scope_columns if c.qualifier)

    def rows(self, hints: AccessHints) -> Iterator[Row]:
        return iter(self.produce())

    def star_items(self, table: str | None) -> list[ast.SelectItem]:
        """The select items `*` (table None) or `table.*` stands for."""
        if table is None:
            chosen = [self.scope_columns[i] for i in self.star]
        else:
            lowered = table.lower()
            if lowered not in self.qualifiers:
                raise UnknownColumn(f"{table}.*")
            chosen = [c for c in self.scope_columns if c.qualifier == lowered]
        return [ast.SelectItem(ast.ColumnRef(c.name, c.qualifier or None), c.name) for c in chosen]


def named(
    columns: list[Column],
    qualifier: str | None,
    produce: Callable[[], Iterable[Row]],
    names: Sequence[str] = (),
) -> Relation:
    """A relation of one table, subquery or VALUES: columns renamed by `names` if given."""
    if names and len(names) != len(columns):
        raise SqlError(
            f"{len(names)} column name(s) given for {qualifier or 'a subquery'}, which has"
            f" {len(columns)} column(s)"
        )
    labels = list(names) or [c.name for c in columns]
    lowered = qualifier.lower() if qualifier else None
    scope_columns = [
        ScopeColumn(i, c.type, label, lowered, False, c.pg_type, c.pg_typmod)
        for i, (c, label) in enumerate(zip(columns, labels, strict=True))
    ]
    return Relation(scope_columns, produce)


def bounded(rows: Iterable[T], deadline: float | None) -> Iterator[T]:
    """The rows, stopping the statement with StatementTimeout once `deadline` has passed
    (looked at every _CHECK_ROWS rows). Each row is taken from `rows` only when asked for."""
    if deadline is None:
        yield from rows
        return
    iterator = iter(rows)
    for first in iterator:
        yield first
        # The slice's rows pass through in C: no step of this loop per row (a scan holds
        # the state lock, and commits wait for it).
        yield from islice(iterator, _CHECK_ROWS - 1)
        # The clock is read only between whole slices, once a row follows: a statement of
        # fewer rows never reads it here (a short statement is not stopped mid-way by the
        # time its parse took).
        for following in islice(iterator, 1):
            admission.running_long()
            if time.monotonic() > deadline:
                raise StatementTimeout.ran_too_long()
            yield following


# -- joins -------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyLookup:
    """How to find a table's row by its key: the key columns' positions and types, in key
    order, and the lookup (None: no such row)."""

    positions: tuple[int, ...]
    types: tuple[str, ...]
    get: Callable[[tuple], Row | None]

    def ident(self, values: Sequence[Any]) -> tuple | None:
        """The key as the table keeps it; None when no row can have it."""
        ident = []
        for value, type_ in zip(values, self.types, strict=True):
            if value is None:
                return None
            if isinstance(value, float) and type_ in ("INT", "BIGINT", "TIMESTAMP"):
                if not value.is_integer():
                    return None
                value = int(value)
            ident.append(value)
        return tuple(ident)


@dataclass
class JoinPlan:
    """How a join is run: the key pairs of its hash join (none: every pair) and the rest of
    ON, checked on each pair. EXPLAIN and the tests read it."""

    method: str  # "hash", "key lookup" or "nested loop"
    left_keys: list[Compiled]
    right_keys: list[Compiled]
    residual: Compiled | None
    # The right side's column of each key, where the key is a plain column.
    right_columns: list[int | None] = field(default_factory=list)


def join(
    left: Relation,
    right: Relation,
    source: ast.JoinSource,
    scope: Scope,
    compile_: Compile,
    deadline: float | None,
) -> Relation:
    """`left JOIN right` as `source` says (kind, ON or USING); `scope` gives parameters,
    functions and subqueries to ON."""
    duplicates = left.qualifiers & right.qualifiers
    if duplicates:
        name = sorted(duplicates)[0]
        raise SqlError(
            f"the table name '{name}' appears twice in FROM; give each an alias (FROM t AS a"
            " JOIN t AS b)"
        )
    width = len(left.scope_columns)
    columns = [
        ScopeColumn(c.index, c.type, c.name, c.qualifier, c.hidden, c.pg_type, c.pg_typmod)
        for c in left.scope_columns
    ]
    columns += [
        ScopeColumn(width + c.index, c.type, c.name, c.qualifier, c.hidden, c.pg_type, c.pg_typmod)
        for c in right.scope_columns
    ]
    star = list(left.star) + [width + i for i in right.star]
    kind = source.kind
    if source.natural:
        source = _natural(source, left, right)
    if source.using:
        plan, merged, star = _using_plan(source, columns, width, star, kind)
    else:
        merged = []
        plan = _on_plan(source.on, columns, width, scope, compile_)
    key = right.key
    if (
        key is not None
        and kind in ("INNER", "LEFT")
        and set(key.positions) <= set(plan.right_columns)
    ):
        plan.method = "key lookup"
    right_width = len(right.scope_columns)
    produce = _producer(left, right, plan, kind, width, right_width, merged, deadline)
    return Relation(columns + [m[0] for m in merged], produce, star, plan=plan)


def _natural(source: ast.JoinSource, left: Relation, right: Relation) -> ast.JoinSource:
    """NATURAL JOIN as the USING of the column names both sides show (in the left side's
    order); with none in common it pairs every row with every row, as PostgreSQL's does."""
    theirs = {right.scope_columns[i].name.lower() for i in right.star}
    common = [
        left.scope_columns[i].name
        for i in left.star
        if left.scope_columns[i].name.lower() in theirs
    ]
    on = None if common else ast.Literal(True, "BOOLEAN")
    return ast.JoinSource(source.kind, source.left, source.right, on, tuple(common))


def _on_plan(
    on: ast.Expr | None, columns: list[ScopeColumn], width: int, scope: Scope, compile_: Compile
) -> JoinPlan:
    both = scope.over(columns, "ON")
    left_only = scope.over(columns[:width], "ON")
    # The right side's expressions read a row of the right side alone.
    right_only = scope.over(
        [
            ScopeColumn(
                c.index - width, c.type, c.name, c.qualifier, c.hidden, c.pg_type, c.pg_typmod
            )
            for c in columns[width:]
        ],
        "ON",
    )
    left_keys: list[Compiled] = []
    right_keys: list[Compiled] = []
    right_columns: list[int | None] = []
    rest: list[ast.Expr] = []
    for term in conjuncts(on):
        pair = _equality(term, left_only, right_only, compile_)
        if pair is None:
            rest.append(term)
        else:
            left_keys.append(pair[0])
            right_keys.append(pair[1])
            right_columns.append(pair[2])
    residual = None
    if on is not None:
        whole = compile_(on, both)  # checks every name and type of ON, also of the keys
        if whole.type not in ("BOOLEAN", "NULL"):
            raise TypeMismatch(f"ON needs a BOOLEAN condition, not {whole.type}")
        if rest:
            condition = rest[0]
            for term in rest[1:]:
                condition = ast.Binary("AND", condition, term)
            residual = compile_(condition, both)
    method = "hash" if left_keys else "nested loop"
    return JoinPlan(method, left_keys, right_keys, residual, right_columns)


def _equality(
    term: ast.Expr, left: Scope, right: Scope, compile_: Compile
) -> tuple[Compiled, Compiled, int | None] | None:
    """(left key, right key, the right key's column if it is one) when `term` is `a = b`
    with a of one side and b of the other."""
    if not (isinstance(term, ast.Binary) and term.op == "="):
        return None
    for first, second in ((term.left, term.right), (term.right, term.left)):
        a = _try_compile(first, left, compile_)
        b = _try_compile(second, right, compile_) if a is not None else None
        if a is not None and b is not None and not (a.constant or b.constant):
            a, b = comparable(a, b, "'='")
            column = right.resolve(second).index if isinstance(second, ast.ColumnRef) else None
            return a, b, column
    return None


def _try_compile(expr: ast.Expr, scope: Scope, compile_: Compile) -> Compiled | None:
    link = scope.outer
    used = link.used if link is not None else False
    try:
        compiled = compile_(expr, scope)
    except SqlError:
        return None
    finally:
        if link is not None:
            link.used = used
    # A key that reads the outer query is not a key of this side.
    if link is not None and link.used != used:
        return None
    return compiled


def _using_plan(
    source: ast.JoinSource, columns: list[ScopeColumn], width: int, star: list[int], kind: str
) -> tuple[JoinPlan, list[tuple[ScopeColumn, int, int]], list[int]]:
    """Keys of `USING (a, b)`; each name becomes one merged column, shown once by `*`."""
    left_keys: list[Compiled] = []
    right_keys: list[Compiled] = []
    merged: list[tuple[ScopeColumn, int, int]] = []
    total = len(columns)
    for offset, name in enumerate(source.using):
        lowered = name.lower()
        sides = []
        for where, side in (("left", columns[:width]), ("right", columns[width:])):
            found = [c for c in side if c.name.lower() == lowered and not c.hidden]
            if len(found) != 1:
                if not found:
                    raise UnknownColumn(f"{name} (USING: the {where} side has no such column)")
                raise SqlError(f"column name '{name}' of USING is ambiguous on the {where} side")
            sides.append(found[0])
        a, b = sides
        left_index, right_index = a.index, b.index - width
        left_keys.append(Compiled(itemgetter(left_index), a.type))
        right_keys.append(Compiled(itemgetter(right_index), b.type))
        comparable(left_keys[-1], right_keys[-1], "USING")
        a.hidden = b.hidden = True
        # Which side's value the merged column shows: the left's, but the right's where
        # a RIGHT or FULL join has no left row.
        pg_type = a.pg_type if a.pg_type == b.pg_type else None
        typmod = a.pg_typmod if a.pg_typmod == b.pg_typmod else -1
        merged_column = ScopeColumn(
            total + offset, a.type, a.name, _NO_TABLE, False, pg_type, typmod
        )
        merged.append((merged_column, a.index, b.index))
    hidden = {i for _, a_index, b_index in merged for i in (a_index, b_index)}
    star = [total + offset for offset in range(len(merged))] + [i for i in star if i not in hidden]
    right_columns: list[int | None] = [b_index - width for _, _, b_index in merged]
    plan = JoinPlan("hash", left_keys, right_keys, None, right_columns)
    return plan, merged, star


def _producer(
    left: Relation,
    right: Relation,
    plan: JoinPlan,
    kind: str,
    width: int,
    right_width: int,
    merged: list[tuple[ScopeColumn, int, int]],
    deadline: float | None,
) -> Callable[[], Iterator[Row]]:
    left_nulls = (None,) * width
    right_nulls = (None,) * right_width
    residual = plan.residual.fn if plan.residual is not None else None
    keep_left = kind in ("LEFT", "FULL")
    keep_right = kind in ("RIGHT", "FULL")
    merge = [(a, b) for _, a, b in merged]

    def finish(row: tuple) -> tuple:
        if not merge:
            return row
        return row + tuple(row[a] if row[a] is not None else row[b] for a, b in merge)

    def hashed() -> Iterator[Row]:
        right_fns = [k.fn for k in plan.right_keys]
        left_fns = [k.fn for k in plan.left_keys]
        # One key (the usual join) is the value itself, several a tuple; NULL equals
        # nothing, so a key with a NULL is neither kept nor looked up. Python's 1 == 1.0
        # with equal hashes is what `=` says; comparable() has refused types that must not
        # meet (TRUE and 1).
        if len(right_fns) == 1:
            right_key, left_key = right_fns[0], left_fns[0]
        else:

            def right_key(row: Row) -> Any:
                key = tuple(fn(row) for fn in right_fns)
                return None if None in key else key

            def left_key(row: Row) -> Any:
                key = tuple(fn(row) for fn in left_fns)
                return None if None in key else key

        table: dict[Any, list[tuple[int, tuple]]] = {}
        right_rows = [tuple(row) for row in bounded(right.rows(AccessHints()), deadline)]
        for number, right_row in enumerate(right_rows):
            key = right_key(right_row)
            if key is not None:
                bucket = table.get(key)
                if bucket is None:
                    table[key] = [(number, right_row)]
                else:
                    bucket.append((number, right_row))
        matched: set[int] = set()
        plain = residual is None and not keep_right and not merge
        for row in bounded(left.rows(AccessHints()), deadline):
            key = left_key(row)
            bucket = table.get(key) if key is not None else None
            if bucket is None:
                if keep_left:
                    yield finish((*row, *right_nulls))
                continue
            row = tuple(row)
            if plain:
                for _, other in bucket:
                    yield row + other
                continue
            found = False
            for number, other in bucket:
                pair = row + other
                if residual is None or residual(pair) is True:
                    found = True
                    if keep_right:
                        matched.add(number)
                    yield finish(pair)
            if keep_left and not found:
                yield finish(row + right_nulls)
        if keep_right:
            for number, other in enumerate(right_rows):
                if number not in matched:
                    yield finish(left_nulls + other)

    def looped() -> Iterator[Row]:
        right_rows = list(bounded(right.rows(AccessHints()), deadline))
        matched: set[int] = set()
        pairs = 0
        for row in bounded(left.rows(AccessHints()), deadline):
            found = False
            for number, other in enumerate(right_rows):
                pairs += 1
                if not pairs & 65535:
                    _check(deadline)
                pair = (*row, *other)
                if residual is None or residual(pair) is True:
                    found = True
                    if keep_right:
                        matched.add(number)
                    yield finish(pair)
            if keep_left and not found:
                yield finish((*row, *right_nulls))
        if keep_right:
            for number, other in enumerate(right_rows):
                if number not in matched:
                    yield finish((*left_nulls, *other))

    def looked_up() -> Iterator[Row]:
        # The whole key of the right table is matched: one lookup per left row, and the
        # table itself is never read.
        key = right.key
        assert key is not None
        chosen = [plan.right_columns.index(p) for p in key.positions]
        key_fns = [plan.left_keys[i].fn for i in chosen]
        others = [
            (plan.left_keys[i].fn, plan.right_keys[i].fn)
            for i in range(len(plan.left_keys))
            if i not in chosen
        ]
        for row in bounded(left.rows(AccessHints()), deadline):
            ident = key.ident([fn(row) for fn in key_fns])
            other = key.get(ident) if ident is not None else None
            if other is not None:
                pair = (*row, *other)
                if all(_equal(lf(row), rf(other)) for lf, rf in others) and (
                    residual is None or residual(pair) is True
                ):
                    yield finish(pair)
                    continue
            if keep_left:
                yield finish((*row, *right_nulls))

    if plan.method == "key lookup":
        return looked_up
    return hashed if plan.left_keys else looped


def _check(deadline: float | None) -> None:
    admission.running_long()
    if deadline is not None and time.monotonic() > deadline:
        raise StatementTimeout.ran_too_long()


def _equal(a: Any, b: Any) -> bool:
    return a is not None and b is not None and a == b
