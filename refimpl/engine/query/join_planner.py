"""The join planner: the inner joins of a FROM clause (commas, CROSS JOIN, INNER JOIN ... ON)
read as one set of FROM items and one set of conditions, whichever way they were written.

Each condition (a conjunct of WHERE or of an inner join's ON) goes where it is first
decidable: a condition on one item filters that item's rows before any join (and, for a
table, chooses its access path: a key lookup, an index, pruned partitions); an equality
between expressions of two items is a key of the hash join that brings the second in; any
other condition on several items is checked as soon as the join that completes them runs. A
condition that holds a subquery or an aggregate, or names a column ambiguously, is left for
the WHERE over the joined rows (which reports the error). A condition that reads no column
of the items (constants, subqueries that read none of them) is checked once, before any row
is read, as PostgreSQL's one-time filter: its error is the query's even when no row would
have been joined, and false or NULL answers no rows. The items are joined smallest
first (its estimated rows: the table's rows cut down by its filters), each next one the
smallest that a key connects to those already joined, so no join is a cross product that a
condition could have avoided. Outer joins are not reordered: each is one item here, its two
sides planned on their own.

The joined rows keep the columns in the order written, so `*` and every name mean what they
meant unplanned; only the order of the rows may differ, which no query without ORDER BY may
rely on.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from refimpl.engine.query.compiled import Scope, ScopeColumn, conjuncts
from refimpl.engine.query.expressions import contains_aggregate
from refimpl.engine.query.relations import Compile, KeyLookup, Relation, join
from refimpl.errors import KdbError, SqlError, TypeMismatch
from refimpl.sql import ast
from refimpl.sql.printer import to_sql

Row = Sequence[Any]
_STEPS = {"hash": "HASH JOIN", "key lookup": "KEY LOOKUP JOIN", "nested loop": "NESTED LOOP JOIN"}
_SUBQUERIES = (ast.ScalarSubquery, ast.Exists, ast.InSubquery, ast.Quantified, ast.ArraySubquery)


@dataclass(frozen=True, slots=True)
class Access:
    """How a FROM item is read under a filter: its rows, the line EXPLAIN shows for the
    read, and the rows it is estimated to give."""

    produce: Callable[[], Iterable[Row]]
    text: str
    estimate: float


@dataclass
class Leaf:
    """One FROM item of the inner joins: its relation (unfiltered), and how to read it
    under a filter (`read(filter, scope)`: a table uses its access path)."""

    relation: Relation
    read: Callable[[ast.Expr | None, Scope], Access]


@dataclass
class Planned:
    """The joined rows (columns in the order written), the conditions left for the WHERE
    over them, and EXPLAIN's lines (each step's input indented under it)."""

    relation: Relation
    leftover: list[ast.Expr]
    lines: list[tuple[int, str]] = field(default_factory=list)


def plan_joins(
    leaves: list[Leaf],
    terms: list[tuple[ast.Expr, range | None]],
    scope: Scope,
    compile_: Compile,
    deadline: float | None,
) -> Planned:
    """Join `leaves` (FROM items in written order) under the conditions `terms`, all of
    them ANDed: a conjunct of WHERE (None: it sees every item) or of an inner join's ON
    (the range of the items that ON sees, among which its names resolve)."""
    _check_names(leaves)
    filters: list[list[ast.Expr]] = [[] for _ in leaves]
    joining: list[tuple[frozenset[int], ast.Expr]] = []
    leftover: list[ast.Expr] = []
    once: list[ast.Expr] = []
    for term, seen in terms:
        places = _places(term, leaves, seen)
        if (places is None or not places) and _reads_no_column(term, scope, compile_):
            once.append(term)
        elif places is None or not places:
            leftover.append(term)
        elif len(places) == 1:
            filters[next(iter(places))].append(term)
        else:
            joining.append((places, term))
    keys = {id(term) for places, term in joining if _is_key(term, leaves, places)}
    reads = []
    filtered = []
    for leaf, terms_of_leaf in zip(leaves, filters, strict=True):
        relation, access = _filtered(leaf, terms_of_leaf, scope, compile_)
        reads.append(access)
        filtered.append(relation)
    order = _order(
        [a.estimate for a in reads], [(p, t) for p, t in joining if id(t) in keys], joining
    )
    lines: list[tuple[int, str]] = [(0, "JOIN " + ", ".join(_label(leaves[i]) for i in order))]
    if once:
        lines.append((1, f"ONE-TIME FILTER {to_sql(and_all(once))}"))
    first = order[0]
    lines.append((1, reads[first].text))
    current = filtered[first]
    joined = {first}
    offsets = {first: 0}
    pending = list(joining)
    for index in order[1:]:
        offsets[index] = len(current.scope_columns)
        joined.add(index)
        now = [term for places, term in pending if places <= joined]
        pending = [(places, term) for places, term in pending if not places <= joined]
        on = and_all(now)
        kind = "CROSS" if on is None else "INNER"
        source = ast.JoinSource(kind, ast.TableSource("?"), ast.TableSource("?"), on)
        current = join(current, filtered[index], source, scope, compile_, deadline)
        assert current.plan is not None
        step = f"{_STEPS[current.plan.method]} {_label(leaves[index])}"
        keyed = [to_sql(term) for term in now if id(term) in keys]
        others = [term for term in now if id(term) not in keys]
        if keyed:
            step += " KEYS " + ", ".join(keyed)
        if others:
            step += f" FILTER {to_sql(and_all(others))}"
        lines.append((1, step))
        read = reads[index].text
        if current.plan.method == "key lookup":
            # The table is not read: each joined row looks its partner up by the key.
            condition = and_all(filters[index])
            read = f"LOOKUP TABLE {_label(leaves[index])} BY PRIMARY KEY" + (
                "" if condition is None else f" FILTER {to_sql(condition)}"
            )
        lines.append((2, read))
    if once:
        current = _gated(current, once, scope, compile_)
    return Planned(_in_written_order(current, leaves, offsets), leftover, lines)


def filtered_by(
    relation: Relation, terms: list[ast.Expr], scope: Scope, compile_: Compile
) -> Relation:
    """`relation`'s rows that pass every one of `terms` (the conditions a join nested in an
    outer join could not place: they are its own, checked on its joined rows)."""
    condition = and_all(terms)
    if condition is None:
        return relation
    compiled = compile_(condition, scope.over(relation.scope_columns, "WHERE"))
    test = compiled.fn
    produce = relation.produce

    def passing() -> Iterable[Row]:
        return (row for row in produce() if test(row) is True)

    return Relation(relation.scope_columns, passing, list(relation.star), plan=relation.plan)


def _reads_no_column(term: ast.Expr, scope: Scope, compile_: Compile) -> bool:
    """Whether `term` is a constant of this query: no column name outside its subqueries,
    and it compiles where no column (of this query or an outer one) can be named, so that
    its subqueries read none of the items either."""
    if contains_aggregate(term) or any(
        isinstance(node, ast.ColumnRef) for node in ast.walk(term, _SUBQUERIES)
    ):
        return False
    try:
        compile_(term, _constants(scope))
    except KdbError:
        return False
    return True


def _constants(scope: Scope) -> Scope:
    return Scope(
        columns=[],
        params=scope.params,
        now=scope.now,
        functions=scope.functions,
        clause="WHERE",
        subqueries=scope.subqueries,
    )


def _gated(relation: Relation, terms: list[ast.Expr], scope: Scope, compile_: Compile) -> Relation:
    """`relation`'s rows when the constant conditions `terms` hold, checked once as its rows
    are asked for; none when one is false or NULL."""
    condition = and_all(terms)
    assert condition is not None
    compiled = compile_(condition, _constants(scope))
    if compiled.type not in ("BOOLEAN", "NULL"):
        raise TypeMismatch(f"WHERE needs a BOOLEAN condition, not {compiled.type}")
    test = compiled.fn
    produce = relation.produce

    def gated() -> Iterable[Row]:
        return produce() if test(()) is True else iter(())

    return Relation(relation.scope_columns, gated, list(relation.star), plan=relation.plan)


def _check_names(leaves: list[Leaf]) -> None:
    seen: set[str] = set()
    for leaf in leaves:
        duplicates = seen & leaf.relation.qualifiers
        if duplicates:
            name = sorted(duplicates)[0]
            raise SqlError(
                f"the table name '{name}' appears twice in FROM; give each an alias (FROM t AS"
                " a JOIN t AS b)"
            )
        seen |= leaf.relation.qualifiers


def _places(term: ast.Expr, leaves: list[Leaf], seen: range | None) -> frozenset[int] | None:
    """The FROM items `term` reads (none: it reads only constants and outer queries); None
    when it cannot be placed (a subquery, an aggregate, a name several items have)."""
    if contains_aggregate(term):
        return None
    found: set[int] = set()
    visible = [(i, leaves[i]) for i in (range(len(leaves)) if seen is None else seen)]
    for node in ast.walk(term):
        if isinstance(node, _SUBQUERIES):
            return None
        if not isinstance(node, ast.ColumnRef):
            continue
        name = node.name.lower()
        if node.table is not None:
            table = node.table.lower()
            owners = [i for i, leaf in visible if table in leaf.relation.qualifiers]
        else:
            owners = [
                i
                for i, leaf in visible
                if any(c.name.lower() == name and not c.hidden for c in leaf.relation.scope_columns)
            ]
        if len(owners) > 1:
            return None
        found.update(owners)
    return frozenset(found)


def _filtered(
    leaf: Leaf, terms: list[ast.Expr], scope: Scope, compile_: Compile
) -> tuple[Relation, Access]:
    """The leaf's relation with its filter applied as it is read (its key lookup checks the
    filter too), and how it is read."""
    relation = leaf.relation
    condition = and_all(terms)
    own = scope.over(relation.scope_columns, "WHERE")
    access = leaf.read(condition, own)
    if condition is None:
        produce = access.produce
        key = relation.key
    else:
        compiled = compile_(condition, own)
        if compiled.type not in ("BOOLEAN", "NULL"):
            raise TypeMismatch(f"WHERE needs a BOOLEAN condition, not {compiled.type}")
        test = compiled.fn
        read = access.produce

        def produce() -> Iterable[Row]:
            return (row for row in read() if test(row) is True)

        key = None
        if relation.key is not None:
            get = relation.key.get

            def checked(ident: tuple, get: Callable[[tuple], Row | None] = get) -> Row | None:
                row = get(ident)
                return row if row is not None and test(row) is True else None

            key = KeyLookup(relation.key.positions, relation.key.types, checked)
        text = access.text + f" FILTER {to_sql(condition)}"
        access = Access(produce, text, access.estimate)
    filtered = Relation(
        relation.scope_columns, produce, list(relation.star), relation.qualifier, key=key
    )
    return filtered, access


def _is_key(term: ast.Expr, leaves: list[Leaf], places: frozenset[int]) -> bool:
    """Whether `term` is `x = y` with x of one item and y of another: a hash join's key."""
    if len(places) != 2 or not (isinstance(term, ast.Binary) and term.op == "="):
        return False
    left, right = _places(term.left, leaves, None), _places(term.right, leaves, None)
    return bool(left and right and len(left) == 1 and len(right) == 1 and left != right)


def _order(
    estimates: list[float],
    keys: list[tuple[frozenset[int], ast.Expr]],
    joining: list[tuple[frozenset[int], ast.Expr]],
) -> list[int]:
    """Smallest first; then the smallest item a key connects to those joined (the written
    order breaks ties), else one another condition connects; an item nothing connects comes
    when nothing else can."""
    remaining = sorted(range(len(estimates)), key=lambda i: (estimates[i], i))
    order = [remaining.pop(0)]
    joined = set(order)
    while remaining:
        chosen = next(
            (
                i
                for terms in (keys, joining)
                for i in remaining
                if any(i in p and p - {i} <= joined for p, _ in terms)
            ),
            remaining[0],
        )
        remaining.remove(chosen)
        order.append(chosen)
        joined.add(chosen)
    return order


def _in_written_order(joined: Relation, leaves: list[Leaf], offsets: dict[int, int]) -> Relation:
    """`joined`'s rows with their values in the order the FROM wrote its items (a row's
    positions are its columns' everywhere: `*`, USING and outer joins rely on it)."""
    columns: list[ScopeColumn] = []
    star: list[int] = []
    positions: list[int] = []
    for index, leaf in enumerate(leaves):
        base = len(columns)
        columns += [
            ScopeColumn(
                base + c.index, c.type, c.name, c.qualifier, c.hidden, c.pg_type, c.pg_typmod
            )
            for c in leaf.relation.scope_columns
        ]
        star += [base + i for i in leaf.relation.star]
        positions += [offsets[index] + i for i in range(len(leaf.relation.scope_columns))]
    produce = joined.produce
    if positions != list(range(len(positions))):
        pick = operator.itemgetter(*positions) if len(positions) > 1 else None
        inner = produce

        def produce() -> Iterable[Row]:
            if pick is None:
                return (tuple(row) for row in inner())
            return map(pick, inner())

    return Relation(columns, produce, star, plan=joined.plan)


def _label(leaf: Leaf) -> str:
    names = sorted(leaf.relation.qualifiers)
    return "(" + " ".join(names) + ")" if len(names) != 1 else names[0]


def planned_join(source: ast.Source | None) -> bool:
    """Whether `source` is inner joins the join planner orders (an outer join is not)."""
    return isinstance(source, ast.JoinSource) and _is_inner(source)


def _is_inner(source: ast.JoinSource) -> bool:
    return source.kind in ("INNER", "CROSS") and not source.using and not source.natural


def flatten(
    source: ast.Source, items: list[ast.Source], terms: list[tuple[ast.Expr, range | None]]
) -> None:
    """The FROM items under inner joins, in written order, and the conditions of their ONs,
    each with the items its ON sees (its names resolve among those only)."""
    if isinstance(source, ast.JoinSource) and _is_inner(source):
        start = len(items)
        flatten(source.left, items, terms)
        flatten(source.right, items, terms)
        seen = range(start, len(items))
        terms += [(term, seen) for term in conjuncts(source.on)]
    else:
        items.append(source)


def selectivity(condition: ast.Expr | None) -> float:
    """The share of rows a filter is guessed to keep: a tenth an equality with a constant, a
    half any other condition."""
    share = 1.0
    for term in conjuncts(condition):
        equality = isinstance(term, ast.Binary) and term.op == "="
        share *= 0.1 if equality else 0.5
    return share


def describe_item(item: ast.Source) -> str:
    """EXPLAIN's words for a FROM item that is no table."""
    if isinstance(item, ast.SubquerySource):
        return "SUBQUERY" + (f" {item.alias}" if item.alias else "")
    if isinstance(item, ast.FunctionSource):
        return f"TABLE FUNCTION {item.name}()"
    if isinstance(item, ast.JoinSource):
        return f"{item.kind} JOIN" + (" USING" if item.using or item.natural else "")
    return f"READ {item.name}" + (f" AS {item.alias}" if item.alias else "")


def and_all(terms: list[ast.Expr]) -> ast.Expr | None:
    if not terms:
        return None
    condition = terms[0]
    for term in terms[1:]:
        condition = ast.Binary("AND", condition, term)
    return condition
