"""Running one parsed statement for a context.

Reads outside a transaction see the committed tables (under the database's state lock, so
never a half-applied commit). Writes run in a transaction: the session's explicit one, or
one of their own that commits when the statement ends. A statement's own row changes are
collected first and merged into the transaction only when the whole statement succeeded,
so a failed statement changes nothing.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any, NoReturn

from refimpl.engine import admission
from refimpl.engine.query.cache_keys import cache_plan
from refimpl.engine.query.compiled import Scope, table_scope
from refimpl.engine.query.expressions import compile_expression
from refimpl.engine.query.point_read import PointPlan, point_plan, read_without_lock
from refimpl.engine.query.prepared_select import prepare_select
from refimpl.engine.query.select import QueryOutput, bounded, plan_access, run_select
from refimpl.engine.query.subqueries import has_subquery
from refimpl.engine.result import Result, message_result, query_result
from refimpl.engine.rights import READ, WRITE
from refimpl.engine.statements import admin as admin_statements
from refimpl.engine.statements import backup as backup_statements
from refimpl.engine.statements import copy as copy_statements
from refimpl.engine.statements import cursors, pg_catalog, procedures, triggers
from refimpl.engine.statements import explain as explain_statements
from refimpl.engine.statements import indexes as index_statements
from refimpl.engine.statements import views as view_statements
from refimpl.engine.statements.publications import HANDLERS as publication_handlers
from refimpl.engine.statements.queries import CommittedTable, QueryRunner, TransactionTable
from refimpl.engine.statements.returning import returned
from refimpl.engine.statements.triggers import Firing, row_triggers
from refimpl.engine.statements.values_load import load_values
from refimpl.engine.statements.without_from import select_without_from
from refimpl.engine.storage import ddl, values
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Ident, Row, Table
from refimpl.engine.storage.transaction import TableWork, Transaction
from refimpl.engine.tracking.plan_cache import PlanCache
from refimpl.errors import (
    AnswersMoreThanOnce,
    DuplicateKey,
    NeedsNotifications,
    NotAllowed,
    SqlError,
    TypeMismatch,
    UnknownFunction,
)
from refimpl.sql import ast
from refimpl.sql.ast_copy import Listen, Notify, Unlisten

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext


def now_micros() -> int:
    """The clock's microseconds: now() of no statement's (a live re-run's; `transaction_time`)."""
    return time.time_ns() // 1000


# -- dispatch ----------------------------------------------------------------------------


def execute(
    context: StatementContext, statement: ast.Statement, text: str, params: Sequence[Any]
) -> Result:
    return handler_of(statement)(context, statement, text, params)


Handler = Callable[["StatementContext", Any, str, Sequence[Any]], Result]

# Statements that only a session which can be sent notifications runs (the protocol's
# sessions answer them before the engine); anywhere else they are refused with a pointer.
_NOTIFICATION_STATEMENTS = (Listen, Unlisten, Notify)


def handler_of(statement: ast.Statement) -> Handler:
    """What `execute` calls for `statement`; NotAllowed for a statement none runs."""
    handler = _HANDLERS.get(type(statement))
    if handler is None and isinstance(statement, _NOTIFICATION_STATEMENTS):
        raise NeedsNotifications(type(statement).__name__.upper())
    if handler is None:
        raise NotAllowed(f"{type(statement).__name__} statements are not supported here")
    return handler


def _select(
    context: StatementContext, statement: ast.Query, text: str, params: Sequence[Any]
) -> Result:
    output = select_rows(context, statement, params)
    return query_result(text, output.columns, output.rows)


def _one_table(context: StatementContext, statement: ast.Query) -> bool:
    """True for a SELECT of one table, table function or none, without subqueries: the
    shape with point reads and the result cache (anything else goes to QueryRunner)."""
    if not isinstance(statement, ast.Select) or has_subquery(statement):
        return False
    source = statement.source
    if isinstance(source, ast.TableSource):
        return names_a_table(context, source)
    return source is None or isinstance(source, ast.FunctionSource)


def names_a_table(context: StatementContext, source: ast.TableSource) -> bool:
    """Whether `source` is a table of the database (not a view or a catalog relation)."""
    name = source.name.lower()
    return name not in context.database.views and not pg_catalog.is_relation(context, name)


def select_rows(
    context: StatementContext, statement: ast.Query, params: Sequence[Any], *, cache: bool = True
) -> QueryOutput:
    """Run a query with the context's rights and transaction; returns a QueryOutput.

    `cache=False` for one-off statements (a live query's bucket re-run) that would only
    crowd the result cache.
    """
    if not _one_table(context, statement):
        return QueryRunner(context, params, context.transaction_time()).run_locked(statement)
    assert isinstance(statement, ast.Select)
    source = statement.source
    # The session's functions are bound per call: made only for a statement that compiles
    # expressions, never for a point read, a cached plan or a cached answer.
    if source is None:
        return select_without_from(context, statement, params)
    if isinstance(source, ast.FunctionSource):
        table_function = context.table_functions().get(source.name)
        if table_function is None:
            raise UnknownFunction(f"table function {source.name}() does not exist")
        row_source = table_function(context, source, statement, params)
        return run_select(
            statement,
            row_source,
            params,
            context.transaction_time(),
            context.sql_functions(),
            context.deadline(),
        )
    assert isinstance(source, ast.TableSource)  # _one_table: no join, no subquery
    return table_rows(context, statement, source, params, cache, point_plan)


# How a one-table SELECT finds its point plan for a schema: `point_plan` (the database's
# plan cache), or a prepared statement's own (`prepared_runs.PreparedTableSelect`).
PointPlans = Callable[[ast.Select, TableSchema, PlanCache], PointPlan | None]


def table_rows(
    context: StatementContext,
    statement: ast.Select,
    source: ast.TableSource,
    params: Sequence[Any],
    cache: bool,
    points: PointPlans,
) -> QueryOutput:
    """`select_rows` of a SELECT of one table without subqueries (`_one_table`)."""
    context.authorize(READ, source.name)
    txn = context.transaction
    if txn is not None and source.name.lower() in txn.work:
        view = TransactionTable(txn.table(source.name), source.alias)
        now = context.transaction_time()
        return run_select(statement, view, params, now, context.sql_functions(), context.deadline())
    database = context.database
    read = read_without_lock(database, statement, source.name, points, params)
    if read is not None:
        return QueryOutput(*read)
    with database.state_lock:
        table = database.committed_table(source.name)
        point = points(statement, table.schema, database.plan_cache)
        if point is not None:
            ident = point.ident(params)
            if ident is not None:
                return QueryOutput(point.columns, point.read(table, ident))
        # The revision is read under the state lock, before the query: see result_cache.
        key, token = cache_plan(database, table.schema, statement, params) if cache else (None, 0)
        if key is not None:
            cached = database.result_cache.get(key, token)
            if cached is not None:
                return QueryOutput(cached.columns, list(cached.rows))
        # Only the rows' blocks are taken under the lock: the scan, its WHERE, sort and groups
        # run after it is let go, so commits (and every reader queued behind a commit) never
        # wait for them.
        prepared = prepare_select(
            statement,
            CommittedTable(table, source.alias),
            params,
            context.transaction_time(),
            context.sql_functions(),
            context.deadline(),
            plans=database.plan_cache,
        )
    output = prepared.finish()
    if key is not None:
        cells = len(output.rows) * max(1, len(output.columns))
        database.result_cache.put(key, token, QueryOutput(output.columns, list(output.rows)), cells)
    return output


def _subscribe(
    context: StatementContext, statement: ast.Subscribe, text: str, params: Sequence[Any]
) -> NoReturn:
    raise AnswersMoreThanOnce()  # the protocol layer says where SUBSCRIBE is served


# -- INSERT, UPDATE, DELETE --------------------------------------------------------------


def row_scope(
    context: StatementContext, schema: TableSchema, params: Sequence[Any], clause: str, now: int
) -> Scope:
    """The scope of expressions over a table's rows that a statement writes (SET, WHERE,
    RETURNING): the statement's moment `now` and the session's functions, as a SELECT's."""
    scope = table_scope(schema, params, clause, now)
    scope.functions = context.sql_functions()
    return scope


def _evaluate_constant(
    expr: ast.Expr, params: Sequence[Any], context: StatementContext, made: list[Scope]
) -> Any:
    """A VALUES item's value. The common cases without compiling: literals and parameters;
    any other is compiled in the statement's one scope (`made`, made at the first: one
    moment for the whole statement, none made for an INSERT of constants)."""
    if type(expr) is ast.Literal:
        return expr.value
    if type(expr) is ast.Param and expr.index < len(params):
        return params[expr.index]
    if not made:
        functions = context.sql_functions()
        now = context.transaction_time()
        made.append(Scope(columns=[], params=params, now=now, functions=functions, clause="VALUES"))
    return compile_expression(expr, made[0]).fn(())


def _insert(
    context: StatementContext, statement: ast.Insert, text: str, params: Sequence[Any]
) -> Result:
    context.authorize(WRITE, statement.table)
    loaded = load_values(context, statement, params)
    if loaded is not None:
        return message_result(text, f"{loaded} row(s) inserted", loaded)

    made: list[Scope] = []  # the VALUES' scope, once one item needs it

    def run(txn: Transaction) -> Result:
        txn.table(statement.table)  # UnknownTable before the SELECT runs
        if statement.select is not None:
            output = select_rows(context, statement.select, params)
            source_rows: Sequence[Sequence[Any]] = output.rows
        else:
            evaluated: list[list[Any]] = []
            for number, row in enumerate(statement.rows or (), start=1):
                if not number & 4095:
                    admission.running_long()  # a long VALUES list makes way for others
                evaluated.append([_evaluate_constant(e, params, context, made) for e in row])
            source_rows = evaluated
        written: list[Row] | None = [] if statement.returning else None
        count = insert_rows(
            context,
            txn,
            statement.table,
            statement.columns,
            source_rows,
            context.deadline(),
            written,
        )
        if written is not None:
            schema = txn.table(statement.table).schema
            scope = row_scope(context, schema, params, "RETURNING", context.transaction_time())
            return returned(text, schema, statement.returning, written, scope)
        return message_result(text, f"{count} row(s) inserted", count)

    return context.write(run)


def insert_rows(
    context: StatementContext,
    txn: Transaction,
    table: str,
    columns: Sequence[str] | None,
    source_rows: Sequence[Sequence[Any]],
    deadline: float | None = None,
    written: list[Row] | None = None,
) -> int:
    """Every way of inserting rows (INSERT, COPY, /imp, /write): `insert_values` with the
    table's INSERT triggers fired around it; `written` (RETURNING's) gets the rows."""
    work = txn.table(table)
    firing = row_triggers(context, txn, table, "INSERT", execute)
    return insert_values(work, work.schema, columns, source_rows, deadline, firing, written)


def insert_values(
    work: TableWork,
    schema: TableSchema,
    columns: Sequence[str] | None,
    source_rows: Sequence[Sequence[Any]],
    deadline: float | None = None,
    firing: Firing | None = None,
    written: list[Row] | None = None,
) -> int:
    """Insert rows of values (in `columns` order, or the table's) into a transaction's table.

    Stops with StatementTimeout once `deadline` has passed. With a `firing`, its BEFORE
    triggers run before the rows are written (keys are checked again after them: they may
    have written the same table) and its AFTER triggers once they are.
    """
    width = len(schema.columns)
    if columns is None:
        positions = list(range(width))
    else:
        positions = [schema.position(name) for name in columns]
        if len(set(positions)) != len(positions):
            raise SqlError("a column is named twice in the INSERT column list")
    types = [(schema.columns[p].type, schema.columns[p].name) for p in positions]
    full = len(positions) == width and positions == list(range(width))
    # Rows converted for these very column types (an import's, before the write lock) are
    # not converted again; the schema may have changed since, and then they are.
    typed = isinstance(source_rows, values.TypedRows) and source_rows.types == tuple(
        kind for kind, _ in types
    )
    table = work.current()
    keyed = table.keyed
    dedup = bool(schema.dedup_key)
    changes: dict[Ident, Row | None] = {}
    coerce = values.coerce
    for number, source in enumerate(bounded(iter(source_rows), deadline), start=1):
        if len(source) != len(positions):
            raise SqlError(
                f"row {number} has {len(source)} value(s) but {len(positions)} column(s) are"
                " being inserted"
            )
        if typed:
            converted = source
        else:
            converted = [coerce(v, t, n) for v, (t, n) in zip(source, types, strict=True)]
        if full:
            # Rows that come typed (an import's) are kept as they are: stored once, not copied.
            if type(source) is tuple and (typed or all(map(operator.is_, converted, source))):
                row = source
            else:
                row = tuple(converted)
        else:
            slots: list[Any] = [None] * width
            for position, value in zip(positions, converted, strict=True):
                slots[position] = value
            row = tuple(slots)
        table.check_not_null(row)
        if keyed:
            ident = table.ident_of(row)
            existing = changes[ident] if ident in changes else work.get(ident)
            if existing is not None and not dedup:
                raise DuplicateKey(schema.name, ident[0] if len(ident) == 1 else ident)
        else:
            ident = (table.allocate_rowid(),)
        changes[ident] = row
    if written is not None:
        written.extend(row for row in changes.values() if row is not None)
    if firing is None:
        work.change(changes)
        return len(source_rows)
    written = [(None, row) for row in changes.values()]
    firing.before(written)
    if keyed and not dedup:
        for ident in changes:
            if work.get(ident) is not None:
                raise DuplicateKey(schema.name, ident[0] if len(ident) == 1 else ident)
    work.change(changes)
    firing.after(written)
    return len(source_rows)


def _matching(
    context: StatementContext,
    work: TableWork,
    schema: TableSchema,
    where: ast.Expr | None,
    params: Sequence[Any],
    deadline: float,
    now: int,
) -> list[tuple[Ident, Row]]:
    """The rows an UPDATE or DELETE changes; the scan stops at the statement's deadline."""
    if where is None:
        return list(bounded(work.rows_with_idents(), deadline))
    scope = row_scope(context, schema, params, "WHERE", now)
    predicate = compile_expression(where, scope)
    if predicate.type not in ("BOOLEAN", "NULL"):
        raise TypeMismatch(f"WHERE needs a BOOLEAN condition, not {predicate.type}")
    hints = plan_access(where, schema, scope)
    test = predicate.fn
    if hints.ident is not None:
        row = work.get(hints.ident)
        return [(hints.ident, row)] if row is not None and test(row) is True else []
    scan = bounded(work.rows_with_idents(hints.index), deadline)
    return [(ident, row) for ident, row in scan if test(row) is True]


def _update(
    context: StatementContext, statement: ast.Update, text: str, params: Sequence[Any]
) -> Result:
    context.authorize(WRITE, statement.table)

    def run(txn: Transaction) -> Result:
        work = txn.table(statement.table)
        schema = work.schema
        table = work.current()
        now = context.transaction_time()  # the transaction's one moment
        scope = row_scope(context, schema, params, "SET", now)
        assignments = []
        for name, expr in statement.assignments:
            position = schema.position(name)
            compiled = compile_expression(expr, scope)
            assignments.append((position, compiled.fn, schema.columns[position]))
        deadline = context.deadline()
        matched = _matching(context, work, schema, statement.where, params, deadline, now)
        updates = []
        for ident, row in bounded(iter(matched), deadline):
            cells = list(row)
            for position, fn, column in assignments:
                cells[position] = values.coerce(fn(row), column.type, column.name)
            new_row = tuple(cells)
            table.check_not_null(new_row)
            new_ident = table.ident_of(new_row) if table.keyed else ident
            updates.append((ident, new_ident, new_row))
        firing = row_triggers(
            context,
            txn,
            statement.table,
            "UPDATE",
            execute,
            [name for name, _ in statement.assignments],
        )
        if firing is not None:
            pairs = [(row, new) for (_, row), (_, _, new) in zip(matched, updates, strict=True)]
            firing.before(pairs)
        changes: dict[Ident, Row | None] = {}
        moved_away = {old for old, new, _ in updates if old != new}
        for old, new, _ in updates:
            if old != new:
                changes[old] = None
        dedup = bool(schema.dedup_key)
        assigned: set[Ident] = set()
        for old, new, new_row in updates:
            if old != new and not dedup:
                taken = new in assigned or (new not in moved_away and work.get(new) is not None)
                if taken:
                    raise DuplicateKey(schema.name, new[0] if len(new) == 1 else new)
            assigned.add(new)
            changes[new] = new_row
        work.change(changes)
        if firing is not None:
            firing.after(pairs)
        if statement.returning:
            new_rows = [row for _, _, row in updates]
            scope = row_scope(context, schema, params, "RETURNING", now)
            return returned(text, schema, statement.returning, new_rows, scope)
        return message_result(text, f"{len(updates)} row(s) updated", len(updates))

    return context.write(run)


def _delete(
    context: StatementContext, statement: ast.Delete, text: str, params: Sequence[Any]
) -> Result:
    context.authorize(WRITE, statement.table)

    def run(txn: Transaction) -> Result:
        work = txn.table(statement.table)
        schema = work.schema
        now = context.transaction_time()  # the transaction's one moment
        matched = _matching(context, work, schema, statement.where, params, context.deadline(), now)
        count = len(matched)
        gone = [row for _, row in matched]
        firing = row_triggers(context, txn, statement.table, "DELETE", execute)
        if firing is not None:
            removed: list[tuple[Row | None, Row | None]] = [(row, None) for _, row in matched]
            firing.before(removed)
        table = work.current()
        whole = _whole_periods(work, table, matched) if matched else []
        if whole:
            dropped = {part for part in table.partitions.keys() if part[0] in set(whole)}
            matched = [(i, r) for i, r in matched if table.part_of_ident(i) not in dropped]
            _drop_periods(txn, work, tuple(whole))
        for ident, _ in matched:
            work.pending[ident] = None
        if firing is not None:
            firing.after(removed)
        if statement.returning:
            scope = row_scope(context, schema, params, "RETURNING", now)
            return returned(text, schema, statement.returning, gone, scope)
        return message_result(text, f"{count} row(s) deleted", count)

    return context.write(run)


def _whole_periods(work: TableWork, table: Table, matched: list[tuple[Ident, Row]]) -> list[str]:
    """Time periods every row of which the DELETE removes (they go as a partition drop)."""
    if table.layout.period is None or work.pending:
        return []
    per_period: dict[str, int] = {}
    for ident, _ in matched:
        part = table.part_of_ident(ident)
        if part is not None:
            per_period[part[0]] = per_period.get(part[0], 0) + 1
    sizes: dict[str, int] = {}
    for part, partition in table.partitions.items():
        sizes[part[0]] = sizes.get(part[0], 0) + len(partition)
    return sorted(p for p, n in per_period.items() if n == sizes.get(p))


def _drop_periods(txn: Transaction, work: TableWork, periods: tuple[str, ...]) -> int:
    """A DELETE's whole periods, dropped as partitions (logged as DROP PARTITION LIST)."""
    work.seal(txn.entries)
    table = work.make_private()
    rev = table.schema.rev_column
    touched = None
    if rev is not None:
        # Only the values of the removed rows move, as for any DELETE.
        position = table.schema.position(rev)
        chosen = set(periods)
        touched = {
            row[position]
            for part, partition in table.partitions.items()
            if part[0] in chosen
            for row in partition.values()
        }
    removed = ddl.drop_partitions(table, periods)
    statement = ast.DropPartitionList(table.schema.name, periods)
    txn.ddl(table.schema.name, ddl.canonical_sql(statement), touched)
    return removed


def copy_in(
    context: StatementContext, statement: ast.CopyFrom, text: str, data: IO[bytes] | None
) -> Result:
    """COPY FROM: every row read and converted first, then one statement installs them all
    (all or nothing, one commit); `data` is STDIN (None when the caller has none). Like /imp,
    a COPY is not stopped by the statement timeout: its size is the caller's choice."""
    rows = copy_statements.read_copy(context, statement, data)

    def run(txn: Transaction) -> Result:
        count = insert_rows(context, txn, rows.table, rows.columns, rows.rows)
        return message_result(text, f"{count} row(s) copied", count)

    return context.write(run)


def _copy_from(
    context: StatementContext, statement: ast.CopyFrom, text: str, params: Sequence[Any]
) -> Result:
    return copy_in(context, statement, text, None)


def _copy_to(
    context: StatementContext, statement: ast.CopyTo, text: str, params: Sequence[Any]
) -> Result:
    # Without a stream to write to (a JSON answer), COPY TO answers its rows as a query.
    output = copy_statements.copy_output(context, statement)
    return query_result(text, output.columns, output.rows)


_HANDLERS: dict[type, Callable[..., Result]] = {
    ast.CopyFrom: _copy_from,
    ast.CopyTo: _copy_to,
    ast.Select: _select,
    ast.Values: _select,
    ast.SetOperation: _select,
    ast.WithQuery: _select,
    ast.Subscribe: _subscribe,
    ast.Insert: _insert,
    ast.Update: _update,
    ast.Delete: _delete,
    **admin_statements.HANDLERS,
    **view_statements.HANDLERS,
    **index_statements.HANDLERS,
    **explain_statements.HANDLERS,
    **triggers.HANDLERS,
    **procedures.HANDLERS,
    **backup_statements.HANDLERS,
    **publication_handlers,
    **cursors.HANDLERS,
    ast.Call: lambda context, statement, text, params: procedures.call(
        context, statement, text, params, execute
    ),
}
