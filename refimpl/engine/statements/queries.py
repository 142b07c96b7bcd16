"""Any query for a statement context: FROM, subqueries, set operations, WITH and views.

A `QueryRunner` resolves every name in FROM in this order: a table of an enclosing WITH, a
view, a table. Each table read needs READ on it (checked before the table is looked up, so a
caller without the right learns nothing of what exists); a view needs READ on the view and,
as its query runs with the reader's rights, on every table it reads. Reads outside a
transaction hold the database's state lock for the whole query, so every table and subquery
sees the same commit.

A shape run (`view_columns`) runs a query as a reader would, rights and all, over no rows:
every table, catalog relation and table function reads as empty, so it costs no scan and
answers only the query's columns and their types, which depend on no row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from refimpl.engine.query.compiled import Compiled, OuterLink, Scope, SemiJoin, comparable
from refimpl.engine.query.expressions import compile_expression, contains_aggregate
from refimpl.engine.query.join_planner import (
    Access,
    Leaf,
    Planned,
    and_all,
    describe_item,
    filtered_by,
    flatten,
    plan_joins,
    planned_join,
    selectivity,
)
from refimpl.engine.query.relations import KeyLookup, Relation, bounded, join, named
from refimpl.engine.query.select import (
    QueryOutput,
    RowSource,
    conjuncts,
    plan_access,
    run_select,
)
from refimpl.engine.query.set_operations import combine, order_and_limit, values_output
from refimpl.engine.query.subqueries import has_subquery
from refimpl.engine.result import Column
from refimpl.engine.rights import READ
from refimpl.engine.statements import pg_catalog
from refimpl.engine.storage.access_hints import AccessHints
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Table, parts_for_period_range
from refimpl.engine.storage.transaction import TableWork
from refimpl.errors import RecursionLimit, SqlError, UnknownColumn, UnknownFunction, UnknownTable
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

# A WITH RECURSIVE table stops with RecursionLimit past this many rounds or rows.
MAX_RECURSION_ROUNDS = 10_000
MAX_RECURSION_ROWS = 1_000_000
# Views may read views, this deep at most (a view dropped and made again could loop).
_MAX_VIEW_DEPTH = 32


class CommittedTable:
    """A committed table as a SELECT source (rows taken under the state lock, read after)."""

    def __init__(self, table: Table, alias: str | None) -> None:
        self.table = table
        self.schema: TableSchema | None = table.schema
        self.qualifier = alias
        self.columns = [Column(c.name, c.type) for c in table.schema.columns]

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]:
        if hints.ident is not None:
            row = self.table.get(hints.ident)
            return iter(() if row is None else (row,))
        if hints.index is not None:
            return iter(hints.index.rows(self.table))
        parts = None
        if hints.low_period is not None or hints.high_period is not None or hints.symbol:
            parts = parts_for_period_range(
                self.table, hints.low_period, hints.high_period, hints.symbol
            )
        return self.table.scan(parts, hints.lead_low, hints.lead_high)


class TransactionTable:
    """A table as an open transaction sees it, as a SELECT source."""

    def __init__(self, work: TableWork, alias: str | None) -> None:
        self.work = work
        self.schema: TableSchema | None = work.schema
        self.qualifier = alias
        self.columns = [Column(c.name, c.type) for c in work.schema.columns]

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]:
        return self.work.rows(hints)


class _NoRows:
    """A source read in a shape run: its columns and schema, no rows."""

    def __init__(self, source: RowSource) -> None:
        self.columns = source.columns
        self.qualifier = source.qualifier
        self.schema = source.schema

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]:
        return iter(())


class _Prepared:
    """A subquery as `refimpl.engine.query.subqueries` runs it (a PreparedQuery)."""

    def __init__(self, runner: QueryRunner, query: ast.Query) -> None:
        self.runner = runner
        self.query = query
        self.columns: list[Column] = []

    def rows(self) -> list[tuple]:
        output = self.runner.run(self.query)
        self.columns = output.columns
        return output.rows


class QueryRunner:
    """Runs queries of one statement; a `SubqueryPlanner` for their expressions.

    `tables` are the WITH tables in sight (name -> answer); `outer` links a subquery to the
    query around it; `views` are the views being expanded (a loop among them is an error);
    `shape`: a shape run, whose sources read no rows.
    """

    def __init__(
        self,
        context: StatementContext,
        params: Sequence[Any],
        now: int,
        *,
        tables: dict[str, QueryOutput] | None = None,
        outer: OuterLink | None = None,
        views: tuple[str, ...] = (),
        shape: bool = False,
        explaining: bool = False,
        describe: Describe | None = None,
    ) -> None:
        self.context = context
        self.params = params
        self.now = now
        self.tables = tables or {}
        self.outer = outer
        self.views = views
        self.shape = shape
        # EXPLAIN plans joins without running what is in FROM; `describe` words a table read.
        self.explaining = explaining
        self.describe = describe
        self.functions = context.sql_functions()
        # The subqueries prepared here by id (each holds its query: the id stays its own).
        self.prepared: dict[int, _Prepared] = {}

    # -- SubqueryPlanner -----------------------------------------------------------------

    def prepare(self, query: ast.Query, outer: OuterLink) -> _Prepared:
        prepared = self.prepared[id(query)] = _Prepared(self._child(outer=outer), query)
        return prepared

    def prepared_columns(self, query: ast.Query) -> list[Column] | None:
        prepared = self.prepared.get(id(query))
        return None if prepared is None else prepared.columns

    def semi_join(self, query: ast.Query, outer: OuterLink) -> SemiJoin | None:
        """EXISTS of a SELECT without grouping or LIMIT, whose WHERE reads the outer query only
        in `inner = outer` terms, as keys computed once (None: it must run per outer row)."""
        if (
            not isinstance(query, ast.Select)
            or query.source is None
            or query.group_by
            or (query.having is not None or query.limit is not None or has_subquery(query))
        ):
            return None
        if any(contains_aggregate(item.expr) for item in query.items):
            return None
        relation = self._relation(query.source)
        inner = Scope(
            columns=relation.scope_columns,
            qualifiers=relation.qualifiers,
            params=self.params,
            now=self.now,
            functions=self.functions,
            clause="WHERE",
        )
        inner_keys: list[Compiled] = []
        outer_keys: list[Compiled] = []
        rest: list[ast.Expr] = []
        for term in conjuncts(query.where):
            pair = _correlation(term, inner, outer.scope)
            if pair is None:
                rest.append(term)
            else:
                inner_keys.append(pair[0])
                outer_keys.append(pair[1])
        if not inner_keys:
            return None
        try:
            tests = [compile_expression(term, inner).fn for term in rest]
            for item in query.items:
                if not isinstance(item.expr, ast.Star):
                    compile_expression(item.expr, inner)
        except UnknownColumn:
            return None  # `rest` reads the outer query too: run per outer row
        keys = set()
        fns = [key.fn for key in inner_keys]
        for row in bounded(relation.rows(AccessHints()), self.context.deadline()):
            if all(test(row) is True for test in tests):
                key = tuple(fn(row) for fn in fns)
                if None not in key:
                    keys.add(key[0] if len(key) == 1 else key)
        return SemiJoin(outer_keys, frozenset(keys))

    def _child(
        self,
        *,
        outer: OuterLink | None = None,
        tables: dict[str, QueryOutput] | None = None,
        shape: bool = False,
    ) -> QueryRunner:
        return QueryRunner(
            self.context,
            self.params,
            self.now,
            tables=self.tables if tables is None else tables,
            outer=outer if outer is not None else self.outer,
            views=self.views,
            shape=self.shape or shape,
        )

    # -- queries -------------------------------------------------------------------------

    def run_locked(self, query: ast.Query) -> QueryOutput:
        """`run` under the state lock (none is needed inside a transaction: it holds the
        write lock, so nothing commits meanwhile)."""
        database = self.context.database
        lock = database.state_lock if self.context.transaction is None else nullcontext()
        with lock:
            return self.run(query)

    def run(self, query: ast.Query) -> QueryOutput:
        if isinstance(query, ast.Select):
            return self._select(query)
        if isinstance(query, ast.Values):
            return values_output(query, self._scope("VALUES"), compile_expression)
        if isinstance(query, ast.SetOperation):
            output = combine(query, self.run(query.left), self.run(query.right))
            return order_and_limit(
                output,
                query.order_by,
                query.limit,
                query.offset,
                self._scope("ORDER BY"),
                compile_expression,
            )
        if isinstance(query, ast.WithQuery):
            return self._with(query)
        raise SqlError(f"{type(query).__name__} is not a query")

    def _scope(self, clause: str) -> Scope:
        return Scope(
            columns=[],
            params=self.params,
            now=self.now,
            functions=self.functions,
            clause=clause,
            subqueries=self,
            outer=self.outer,
        )

    def _select(self, select: ast.Select) -> QueryOutput:
        source: RowSource | None
        if planned_join(select.source) and not (
            select.where is not None and contains_aggregate(select.where)
        ):
            # The WHERE's conditions go into the join plan; what it cannot place stays.
            assert isinstance(select.source, ast.JoinSource)
            planned = self.plan_joins(select.source, select.where)
            source = planned.relation
            select = dataclasses.replace(select, where=and_all(planned.leftover))
        else:
            source = None if select.source is None else self._source(select.source, select)
        return run_select(
            select,
            source,
            self.params,
            self.now,
            self.functions,
            self.context.deadline(),
            subqueries=self,
            outer=self.outer,
        )

    def _with(self, query: ast.WithQuery) -> QueryOutput:
        tables = dict(self.tables)
        for table in query.tables:
            name = table.name.lower()
            if query.recursive and _reads(table.query, name):
                output = self._recursive(table, tables)
            else:
                output = self._child(tables=tables).run(table.query)
            tables[name] = _renamed(output, table.columns, table.name)
        return self._child(tables=tables).run(query.body)

    def _recursive(self, table: ast.CommonTable, tables: dict[str, QueryOutput]) -> QueryOutput:
        """`anchor UNION [ALL] step`: step runs over the rows the last round added, until a
        round adds none."""
        query = table.query
        if (
            not isinstance(query, ast.SetOperation)
            or query.op != "UNION"
            or _reads(query.left, table.name.lower())
        ):
            raise SqlError(
                f"the recursive table '{table.name}' must be <anchor> UNION [ALL] <step>, where"
                " only the step reads the table itself"
            )
        name = table.name.lower()
        anchor = _renamed(self._child(tables=tables).run(query.left), table.columns, table.name)
        seen = None if query.all else set(anchor.rows)
        rows = list(anchor.rows if query.all else dict.fromkeys(anchor.rows))
        fresh = rows
        rounds = 0
        while fresh:
            rounds += 1
            if rounds > MAX_RECURSION_ROUNDS or len(rows) > MAX_RECURSION_ROWS:
                raise RecursionLimit(
                    f"the recursive table '{table.name}' went on for more than"
                    f" {MAX_RECURSION_ROUNDS} rounds or {MAX_RECURSION_ROWS} rows; give its"
                    " step a WHERE that ends it (WHERE n < 100)"
                )
            working = dict(tables)
            working[name] = QueryOutput(anchor.columns, fresh)
            step = self._child(tables=working).run(query.right)
            if len(step.columns) != len(anchor.columns):
                raise SqlError(
                    f"the two sides of UNION in '{table.name}' answer {len(anchor.columns)} and"
                    f" {len(step.columns)} columns; they must answer the same number"
                )
            fresh = step.rows
            if seen is not None:
                fresh = [row for row in dict.fromkeys(fresh) if row not in seen]
                seen.update(fresh)
            rows += fresh
        output = QueryOutput(anchor.columns, rows)
        return order_and_limit(
            output,
            query.order_by,
            query.limit,
            query.offset,
            self._scope("ORDER BY"),
            compile_expression,
        )

    # -- FROM ----------------------------------------------------------------------------

    def _source(self, source: ast.Source, select: ast.Select) -> RowSource:
        """What a SELECT reads. A lone table keeps its planner (point reads, pruning)."""
        if isinstance(source, ast.TableSource):
            return self._table(source, lone=True)
        if isinstance(source, ast.FunctionSource):
            return self._function(source, select)
        return self._relation(source)

    def plan_joins(self, source: ast.JoinSource, where: ast.Expr | None) -> Planned:
        """The inner joins of `source` planned with the conditions of their ONs and of
        `where` (see `refimpl.engine.query.join_planner`)."""
        items: list[ast.Source] = []
        terms: list[tuple[ast.Expr, range | None]] = []
        flatten(source, items, terms)
        terms += [(term, None) for term in conjuncts(where)]
        leaves = [self._leaf(item) for item in items]
        return plan_joins(
            leaves, terms, self._scope("ON"), compile_expression, self.context.deadline()
        )

    def _leaf(self, item: ast.Source) -> Leaf:
        if isinstance(item, ast.TableSource):
            table = self._table(item, lone=True)
            if isinstance(table, CommittedTable | TransactionTable):
                return self._table_leaf(item, table)
        relation: Relation
        if isinstance(item, ast.TableSource) and isinstance(table, Relation):
            relation = table  # a WITH table, a view, a catalog relation: read already
        elif self.explaining:
            # EXPLAIN runs nothing: a subquery or view is planned over no rows.
            relation = self._child(shape=True)._relation(item)
        else:
            relation = self._relation(item)
        rows = relation.produce()
        estimate = float(len(rows)) if isinstance(rows, list) else 1000.0
        text = describe_item(item)

        def read(condition: ast.Expr | None, scope: Scope) -> Access:
            return Access(relation.produce, text, estimate * selectivity(condition))

        return Leaf(relation, read)

    def _table_leaf(self, item: ast.TableSource, table: CommittedTable | TransactionTable) -> Leaf:
        schema = table.schema
        assert schema is not None
        relation = named(table.columns, item.alias or item.name, lambda: ())
        relation.key = _key_lookup(table)
        size = len(self.context.database.committed_table(item.name))
        label = schema.name + (f" AS {item.alias}" if item.alias else "")
        describe = self.describe

        def read(condition: ast.Expr | None, scope: Scope) -> Access:
            hints = AccessHints() if condition is None else plan_access(condition, schema, scope)
            text = describe(item.name, hints, label) if describe else f"SCAN TABLE {label}"
            estimate = 1.0 if hints.ident is not None else size * selectivity(condition)
            return Access(lambda: table.rows(hints), text, estimate)

        return Leaf(relation, read)

    def _relation(self, source: ast.Source) -> Relation:
        if planned_join(source):
            assert isinstance(source, ast.JoinSource)
            planned = self.plan_joins(source, None)
            # What it could not place is its ONs' own: checked on its rows, not dropped.
            return filtered_by(
                planned.relation, planned.leftover, self._scope("ON"), compile_expression
            )
        if isinstance(source, ast.JoinSource):
            left, right = self._relation(source.left), self._relation(source.right)
            return join(
                left, right, source, self._scope("ON"), compile_expression, self.context.deadline()
            )
        if isinstance(source, ast.SubquerySource):
            output = self.run(source.query)
            return named(output.columns, source.alias, lambda: output.rows, source.columns)
        if isinstance(source, ast.FunctionSource):
            # No clause of the outer SELECT is pushed into a function read by a join.
            neutral = ast.Select((ast.SelectItem(ast.Star()),), source)
            rows = self._function(source, neutral)
        else:
            rows = self._table(source, lone=False)
        if isinstance(rows, Relation):
            return rows
        assert isinstance(source, ast.TableSource | ast.FunctionSource)
        return named(rows.columns, source.alias or source.name, lambda: rows.rows(AccessHints()))

    def _function(self, source: ast.FunctionSource, select: ast.Select) -> RowSource:
        table_function = self.context.table_functions().get(source.name)
        if table_function is None:
            raise UnknownFunction(f"table function {source.name}() does not exist")
        if self.outer is not None and source.args:
            # In a correlated subquery the arguments may read the outer row: the function
            # gets their values for that row, as constants.
            scope = self._scope("FROM")
            compiled = [compile_expression(arg, scope) for arg in source.args]
            values = [(c.fn(()), c.type) for c in compiled]
            source = dataclasses.replace(
                source,
                args=tuple(
                    ast.Literal(value, "NULL" if value is None else kind) for value, kind in values
                ),
            )
        rows = table_function(self.context, source, select, self.params)
        return _NoRows(rows) if self.shape else rows

    def _table(self, source: ast.TableSource, lone: bool) -> RowSource:
        name = source.name.lower()
        qualifier = source.alias or source.name.removeprefix("information_schema.")
        if name in self.tables:
            output = self.tables[name]
            return named(output.columns, qualifier, lambda: output.rows)
        context = self.context
        # A shape run leaves views out of the catalog's rows: it reads none of them, and a
        # view of pg_class would otherwise take its own shape to make its shape.
        system = pg_catalog.relation(context, name, None if self.shape else self.view_columns)
        if system is not None:
            rows = [] if self.shape else system.rows
            return named(system.columns, qualifier, lambda: rows)
        view = context.database.views.get(name)
        if view is not None:
            return self._view(source, view)
        context.authorize(READ, source.name)
        txn = context.transaction
        if txn is not None and name in txn.work:
            table: CommittedTable | TransactionTable = TransactionTable(
                txn.table(source.name), source.alias
            )
        else:
            table = CommittedTable(context.database.committed_table(source.name), source.alias)
        if self.shape:
            empty = _NoRows(table)
            return empty if lone else named(empty.columns, qualifier, lambda: ())
        if lone:
            return table
        relation = named(table.columns, qualifier, lambda: table.rows(AccessHints()))
        relation.key = _key_lookup(table)
        return relation

    def _view(self, source: ast.TableSource, text: str) -> Relation:
        output = self._view_output(source.name, text)
        return named(output.columns, source.alias or source.name, lambda: output.rows)

    def _view_output(self, spelled: str, text: str) -> QueryOutput:
        self.context.authorize(READ, spelled)
        name = spelled.lower()
        if name in self.views or len(self.views) >= _MAX_VIEW_DEPTH:
            raise SqlError(f"the view '{spelled}' reads itself through other views")
        statement = parse_cached(text).statements[0]
        assert isinstance(statement, ast.CreateView)
        runner = QueryRunner(
            self.context, (), self.now, views=(*self.views, name), shape=self.shape
        )
        return runner.run(statement.query)

    def view_columns(self, name: str) -> list[Column]:
        """The columns of the view `name` (lower case) as this caller would read it: a
        shape run of its query, so with the rights a read needs (Forbidden without READ on
        the view or a table it reads) and a read's errors (a table it reads was dropped)."""
        # Not inside the views this runner expands: a view of pg_class asks for its own
        # shape, which is no loop (a shape run lists no views).
        runner = QueryRunner(self.context, (), self.now, shape=True)
        database = self.context.database
        lock = database.state_lock if self.context.transaction is None else nullcontext()
        with lock:
            text = database.views.get(name)
            if text is None:
                raise UnknownTable(name)
            return runner._view_output(name, text).columns


def view_columns(context: StatementContext, name: str) -> list[Column]:
    """`QueryRunner.view_columns` for a caller outside any query (a catalog function)."""
    return QueryRunner(context, (), context.transaction_time()).view_columns(name)


def _correlation(term: ast.Expr, inner: Scope, outer: Scope) -> tuple[Compiled, Compiled] | None:
    """(inner side, outer side) of `a = b` where one side reads only the subquery's tables and
    the other only names the subquery does not have."""
    if not (isinstance(term, ast.Binary) and term.op == "="):
        return None
    for mine, theirs in ((term.left, term.right), (term.right, term.left)):
        try:
            inner_side = compile_expression(mine, inner)
        except UnknownColumn:
            continue
        try:
            compile_expression(theirs, inner)
            continue  # it reads (or could read) the subquery's own columns
        except UnknownColumn:
            pass
        try:
            outer_side = compile_expression(theirs, outer)
        except UnknownColumn:
            return None
        if inner_side.constant or outer_side.constant:
            return None
        inner_side, outer_side = comparable(inner_side, outer_side, "'='")
        return inner_side, outer_side
    return None


def _key_lookup(table: CommittedTable | TransactionTable) -> KeyLookup | None:
    """How a join finds the table's rows by key (None: the table has no key)."""
    schema = table.schema
    assert schema is not None
    if not schema.key_columns:
        return None
    positions = tuple(schema.position(name) for name in schema.key_columns)
    types = tuple(schema.columns[p].type for p in positions)
    get = table.table.get if isinstance(table, CommittedTable) else table.work.get
    return KeyLookup(positions, types, get)


def _renamed(output: QueryOutput, names: tuple[str, ...], table: str) -> QueryOutput:
    if not names:
        return output
    if len(names) != len(output.columns):
        raise SqlError(
            f"{len(names)} column name(s) given for '{table}', whose query answers"
            f" {len(output.columns)} column(s)"
        )
    pairs = zip(names, output.columns, strict=True)
    columns = [Column(n, c.type, None, c.pg_type, c.pg_typmod) for n, c in pairs]
    return QueryOutput(columns, output.rows)


def _reads(node: object, name: str) -> bool:
    """True when `node` names the table `name` anywhere in a FROM."""
    return any(
        isinstance(item, ast.TableSource) and item.name.lower() == name for item in ast.walk(node)
    )


# A table read's words in EXPLAIN: (table name, its access hints, its label) -> line.
Describe = Callable[[str, AccessHints, str], str]
