"""EXPLAIN <query>: how the query would read, one line a step, without running it.

Each table read says its access path: `LOOKUP TABLE t BY PRIMARY KEY (id)` (a point read),
`SEARCH TABLE t USING INDEX i (a = 1, b > 2)` (a secondary index), or `SCAN TABLE t`, with
the partitions a time range or symbol leaves (`partitions 2 of 12`). Inner joins show the
join planner's order, each step's keys and where each filter runs; outer joins, subqueries in
FROM, set operations and WITH tables nest under the step that combines them. EXPLAIN needs
the rights the query needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from refimpl.engine.query.compiled import table_scope
from refimpl.engine.query.expressions import contains_aggregate
from refimpl.engine.query.join_planner import and_all, planned_join
from refimpl.engine.query.select import plan_access
from refimpl.engine.result import Column, Result, query_result
from refimpl.engine.rights import Right
from refimpl.engine.statements.queries import QueryRunner
from refimpl.engine.storage.access_hints import AccessHints, IndexProbe
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Table, parts_for_period_range
from refimpl.engine.storage.values import to_text
from refimpl.errors import NotAllowed
from refimpl.sql import ast
from refimpl.sql.printer import to_sql

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

_QUERIES = (ast.Select, ast.SetOperation, ast.WithQuery, ast.Values)


class _Planner:
    def __init__(self, context: StatementContext, params: Sequence[Any]) -> None:
        self.context = context
        self.params = params
        self.lines: list[str] = []
        self.with_tables: set[str] = set()

    def add(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def query(self, query: ast.Statement, depth: int) -> None:
        if isinstance(query, ast.Select):
            self.select(query, depth)
        elif isinstance(query, ast.SetOperation):
            self.tail(query, depth)
            self.add(depth, query.op + (" ALL" if query.all else ""))
            self.query(query.left, depth + 1)
            self.query(query.right, depth + 1)
        elif isinstance(query, ast.WithQuery):
            for table in query.tables:
                self.add(depth, f"WITH {table.name}")
                self.query(table.query, depth + 1)
                self.with_tables.add(table.name.lower())
            self.query(query.body, depth)
        elif isinstance(query, ast.Values):
            self.add(depth, f"VALUES ({len(query.rows)} row(s))")

    def select(self, select: ast.Select, depth: int) -> None:
        # From the answer back to the reads: each line's input is the line under it.
        self.tail(select, depth)
        if select.distinct:
            self.add(depth, "DISTINCT")
        items = [item.expr for item in select.items]
        if select.group_by or any(contains_aggregate(e) for e in (*items, select.having)):
            self.add(depth, "AGGREGATE" + (" BY GROUP" if select.group_by else ""))
        self.source(select.source, select.where, depth)

    def tail(self, query: ast.Select | ast.SetOperation, depth: int) -> None:
        if query.limit is not None:
            self.add(depth, f"LIMIT {to_sql(query.limit)}")
        if query.order_by:
            self.add(depth, "SORT BY " + ", ".join(to_sql(item) for item in query.order_by))

    def source(self, source: ast.Source | None, where: ast.Expr | None, depth: int) -> None:
        if source is None:
            self.add(depth, "ONE ROW (no FROM)")
        elif isinstance(source, ast.TableSource):
            self.table(source, where, depth)
        elif isinstance(source, ast.FunctionSource):
            self.add(depth, f"TABLE FUNCTION {source.name}()")
        elif isinstance(source, ast.SubquerySource):
            self.add(depth, "SUBQUERY" + (f" {source.alias}" if source.alias else ""))
            self.query(source.query, depth + 1)
        elif planned_join(source):
            assert isinstance(source, ast.JoinSource)
            runner = QueryRunner(
                self.context,
                self.params,
                self.context.transaction_time(),
                explaining=True,
                describe=self.describe,
            )
            planned = runner.plan_joins(source, where)
            if planned.leftover:
                self.add(depth, f"FILTER {to_sql(and_all(planned.leftover))}")
                depth += 1
            for indent, line in planned.lines:
                self.add(depth + indent, line)
        elif isinstance(source, ast.JoinSource):
            self.add(depth, f"{source.kind} JOIN")
            # Each side of a join is read whole: the WHERE is applied to the joined rows.
            self.source(source.left, None, depth + 1)
            self.source(source.right, None, depth + 1)

    def table(self, source: ast.TableSource, where: ast.Expr | None, depth: int) -> None:
        name = source.name.lower()
        if name in self.with_tables:
            self.add(depth, f"READ WITH TABLE {source.name}")
            return
        context = self.context
        if name in context.database.views:
            context.authorize(Right.READ, source.name)
            self.add(depth, f"READ VIEW {source.name}")
            return
        context.authorize(Right.READ, source.name)
        table = self._table(source.name)
        hints = plan_access(where, table.schema, table_scope(table.schema, self.params, "WHERE"))
        label = table.schema.name + (f" AS {source.alias}" if source.alias else "")
        self.add(depth, _access(table, hints, label))

    def describe(self, name: str, hints: AccessHints, label: str) -> str:
        """The line of a table read through `hints` (a join planner's words for it)."""
        return _access(self._table(name), hints, label)

    def _table(self, name: str) -> Table:
        txn = self.context.transaction
        if txn is not None and txn.has_table(name):
            return txn.table(name).current()
        return self.context.database.committed_table(name)


def _access(table: Table, hints: AccessHints, name: str) -> str:
    schema = table.schema
    if hints.ident is not None:
        return f"LOOKUP TABLE {name} BY PRIMARY KEY ({', '.join(schema.key_columns)})"
    if hints.index is not None:
        return f"SEARCH TABLE {name} USING {_index_text(schema, hints.index)}"
    text = f"SCAN TABLE {name}"
    if hints.low_period is not None or hints.high_period is not None or hints.symbol:
        kept = parts_for_period_range(table, hints.low_period, hints.high_period, hints.symbol)
        text += f" (partitions {len(kept)} of {len(table.partitions)})"
    elif hints.lead_low is not None or hints.lead_high is not None:
        lead = table.layout.lead_position
        assert lead is not None  # the planner bounds only a leading column
        text += f" (range of {schema.columns[lead].name})"
    return text


def _index_text(schema: TableSchema, probe: IndexProbe) -> str:
    definition = next(i for i in schema.all_indexes() if i.name.lower() == probe.name)
    kind = "UNIQUE INDEX" if definition.unique else "INDEX"
    terms = []
    for column, value in zip(probe.columns, probe.prefix, strict=False):
        terms.append(f"{column} = {_shown(value, schema.type_of(column))}")
    if probe.low is not None or probe.high is not None:
        column = probe.columns[-1]
        kind_of = schema.type_of(column)
        if probe.low is not None:
            op = ">=" if probe.low.inclusive else ">"
            terms.append(f"{column} {op} {_shown(probe.low.value, kind_of)}")
        if probe.high is not None:
            op = "<=" if probe.high.inclusive else "<"
            terms.append(f"{column} {op} {_shown(probe.high.value, kind_of)}")
    return f"{kind} {definition.name} ({', '.join(terms)})"


def _shown(value: Any, kind: str) -> str:
    text = to_text(value, kind)
    return f"'{text}'" if isinstance(value, str) or kind == "TIMESTAMP" else text


def _explain(
    context: StatementContext, statement: ast.Explain, text: str, params: Sequence[Any]
) -> Result:
    if not isinstance(statement.query, _QUERIES):
        raise NotAllowed(
            "EXPLAIN explains a query (SELECT, VALUES, a set operation or WITH);"
            f" not {type(statement.query).__name__}"
        )
    planner = _Planner(context, params)
    planner.query(statement.query, 0)
    return query_result(text, [Column("plan", "STRING")], [(line,) for line in planner.lines])


HANDLERS: dict[type, Callable[..., Result]] = {ast.Explain: _explain}
