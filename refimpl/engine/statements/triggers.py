"""Triggers (spec/sources.md, "Triggers"): CREATE TRIGGER, DROP TRIGGER, SHOW TRIGGERS, and
firing them for the rows a statement writes.

A trigger is schema of its database: kept as its canonical text (with its definer) in the
database's state, logged as a database change and kept by checkpoints; DROP TABLE drops the
table's triggers in the same commit. Every way of writing rows (INSERT, UPDATE, DELETE,
COPY, /imp, /write) goes through the executor, which asks `row_triggers` for a `Firing`
(None when the table has no trigger for the change, the common case, at the cost of one
dict lookup) and calls its `before` and `after` around the statement's own change: BEFORE
triggers fire row by row before any row of the statement is written, AFTER triggers row by
row once all are. Their statements run in the writing transaction (`RoutineContext`) with
the definer's rights; an error in any of them fails the statement that fired it, naming the
trigger.

A definer is a user, not a name: the stored text names the definer with the identity the
user had when the trigger was made (`name#<id>`, `AccessStore.user_id`; a bare name for the
admin user and for triggers and users made before users had ids). A trigger whose definer
was dropped does not run, also once a user of the same name is made again (another user,
who must not inherit the dropped one's triggers): it fails the statement that fires it, until
an administrator drops it or makes it again.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refimpl.engine.result import Column, Result, message_result, query_result
from refimpl.engine.rights import ADMIN_USER, LEGACY_USER_ID, USER_ID_BYTES, Principal, Right
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
)
from refimpl.engine.storage import ddl
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Row
from refimpl.engine.storage.transaction import Transaction
from refimpl.errors import (
    Forbidden,
    KdbError,
    RoutineExists,
    SqlError,
    UnknownColumn,
    UnknownTable,
    UserError,
)
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

# The row references a trigger's event has (SQLite's rule): INSERT has NEW, DELETE OLD.
_SIDES = {"INSERT": ("new",), "UPDATE": ("old", "new"), "DELETE": ("old",)}


def triggers_of(context: StatementContext) -> dict[str, str]:
    """The database's triggers: lower-case name -> canonical CREATE TRIGGER text."""
    return routines_of(context, "trigger")


# -- CREATE, DROP, SHOW ------------------------------------------------------------------


def _create_trigger(
    context: StatementContext, statement: ast.CreateTrigger, text: str, params: Sequence[Any]
) -> Result:
    context.authorize(Right.ADMIN)
    principal = context.principal
    definer = statement.definer or principal.name
    if definer is None:
        raise Forbidden(
            "a trigger runs with its creator's rights, so it needs a named"
            " creator; send a user's token"
        )
    if (
        statement.definer is not None
        and definer.lower() != (principal.name or "").lower()
        and not principal.is_admin
    ):
        raise Forbidden(
            f"only the admin user may create a trigger that runs as another user ('{definer}')"
        )
    if has_params((*statement.body, statement.when)):
        raise SqlError("a trigger takes no ? parameters; write NEW.column or OLD.column")
    definer_id = context.access.user_id(definer)
    if definer_id is None:
        raise UserError(f"user '{definer}' does not exist; a trigger runs as an existing user")
    name = statement.name

    def run(txn: Transaction) -> Result:
        if name.lower() in triggers_of(context):
            if statement.if_not_exists:
                return message_result(text, f"trigger '{name}' already exists")
            raise RoutineExists(
                "trigger", name, "use CREATE TRIGGER IF NOT EXISTS, or DROP TRIGGER first"
            )
        if not txn.has_table(statement.table):
            if statement.table.lower() in context.database.views:
                raise SqlError(f"'{statement.table}' is a view; triggers are on tables")
            raise UnknownTable(statement.table)
        schema = txn.table(statement.table).schema
        for column in statement.columns:
            schema.position(column)  # UnknownColumn for a column the table lacks
        stored = ast.CreateTrigger(
            name,
            statement.timing,
            statement.event,
            schema.name,
            statement.body,
            statement.columns,
            statement.when,
            definer=bound_definer(definer, definer_id),
        )
        _check_rows_named(stored, schema)
        txn.database_changes.append(ddl.canonical_sql(stored))
        return message_result(text, f"trigger '{name}' created on table '{schema.name}'")

    return context.write(run)


def _check_rows_named(trigger: ast.CreateTrigger, schema: TableSchema) -> None:
    """NEW and OLD only where the event has them, and only of the table's columns."""
    sides = _SIDES[trigger.event]
    for node in ast.walk((trigger.body, trigger.when)):
        if isinstance(node, ast.ColumnRef) and node.table is not None:
            side = node.table.lower()
            if side in ("new", "old"):
                if side not in sides:
                    raise SqlError(
                        f"a {trigger.event} trigger has no {side.upper()} row; use"
                        f" {' and '.join(s.upper() for s in sides)}"
                    )
                if node.name.lower() not in schema.positions:
                    raise UnknownColumn(node.name, schema.name)


def _drop_trigger(
    context: StatementContext, statement: ast.DropTrigger, text: str, params: Sequence[Any]
) -> Result:
    name = statement.name
    return drop_routine(context, "trigger", name, statement.if_exists, ast.DropTrigger(name), text)


def drop_table_triggers(context: StatementContext, txn: Transaction, table: str) -> None:
    """DROP TABLE drops the table's triggers in its own commit (logged one by one)."""
    for text in triggers_of(context).values():
        trigger = parse_cached(text).statements[0]
        assert isinstance(trigger, ast.CreateTrigger)
        if trigger.table.lower() == table.lower():
            txn.database_changes.append(ddl.canonical_sql(ast.DropTrigger(trigger.name)))


_SHOW_COLUMNS = [
    Column("trigger", "STRING"),
    Column("table", "STRING"),
    Column("timing", "STRING"),
    Column("event", "STRING"),
    Column("definer", "STRING"),
    Column("statement", "STRING"),
]


def _show_triggers(
    context: StatementContext, statement: ast.ShowTriggers, text: str, params: Sequence[Any]
) -> Result:
    context.authorize(Right.READ)
    rows = []
    for stored in sorted(triggers_of(context).values(), key=str.lower):
        trigger = parse_cached(stored).statements[0]
        assert isinstance(trigger, ast.CreateTrigger)
        if not context.can_read(trigger.table):
            continue
        event = trigger.event + (f" OF {', '.join(trigger.columns)}" if trigger.columns else "")
        shown = ddl.canonical_sql(
            ast.CreateTrigger(
                trigger.name,
                trigger.timing,
                trigger.event,
                trigger.table,
                trigger.body,
                trigger.columns,
                trigger.when,
            )
        )
        definer = None if trigger.definer is None else split_definer(trigger.definer)[0]
        rows.append((trigger.name, trigger.table, trigger.timing, event, definer, shown))
    rows.sort(key=lambda row: row[0].lower())
    return query_result(text, _SHOW_COLUMNS, rows)


def bound_definer(name: str, user_id: str) -> str:
    """The stored definer of a trigger made by the user `name` whose id is `user_id`."""
    return name if user_id == LEGACY_USER_ID else f"{name}#{user_id}"


def split_definer(stored: str) -> tuple[str, str]:
    """(name, id) of a stored definer (`bound_definer`); a bare name is LEGACY_USER_ID's."""
    found = _BOUND_DEFINER.fullmatch(stored)
    if found is None:
        return stored, LEGACY_USER_ID
    return found[1], found[2]


_BOUND_DEFINER = re.compile(rf"(.+)#([0-9a-f]{{{2 * USER_ID_BYTES}}})", re.DOTALL)


HANDLERS: dict[type, Callable[..., Result]] = {
    ast.CreateTrigger: _create_trigger,
    ast.DropTrigger: _drop_trigger,
    ast.ShowTriggers: _show_triggers,
}

# -- firing ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Trigger:
    """A trigger bound to its table's columns: NEW.c and OLD.c are parameters (OLD's
    columns first, then NEW's), so each row runs the same statements with its values."""

    name: str
    table: str
    definer: str  # the user's name
    definer_id: str  # and identity (`split_definer`)
    timing: str
    columns: frozenset[str]  # UPDATE OF, lower case; empty: any UPDATE
    when: ast.Select | None  # SELECT (condition), run for each row
    body: tuple[ast.Statement, ...]


@functools.lru_cache(maxsize=512)
def _bound(text: str, column_names: tuple[str, ...]) -> Trigger:
    statement = parse_cached(text).statements[0]
    assert isinstance(statement, ast.CreateTrigger) and statement.definer is not None
    positions = {name.lower(): index for index, name in enumerate(column_names)}
    width = len(column_names)

    def binding(ref: ast.ColumnRef) -> int | None:
        side = None if ref.table is None else ref.table.lower()
        if side not in ("old", "new"):
            return None
        position = positions.get(ref.name.lower())
        if position is None:  # the column was dropped since the trigger was made
            raise UnknownColumn(ref.name, statement.table)
        return position if side == "old" else width + position

    when = None
    if statement.when is not None:
        when = ast.Select((ast.SelectItem(bind_names(statement.when, binding)),))
    return Trigger(
        statement.name,
        statement.table,
        *split_definer(statement.definer),
        statement.timing,
        frozenset(c.lower() for c in statement.columns),
        when,
        tuple(bind_names(step, binding) for step in statement.body),
    )


class Firing:
    """The triggers one statement fires on one table, ready for its rows."""

    def __init__(
        self,
        context: StatementContext,
        txn: Transaction,
        schema: TableSchema,
        triggers: list[Trigger],
        run_statement: RunStatement,
    ) -> None:
        self._context = context
        self._txn = txn
        self._types = [column.type for column in schema.columns]
        self._before = [t for t in triggers if t.timing == "BEFORE"]
        self._after = [t for t in triggers if t.timing == "AFTER"]
        self._run = run_statement

    def before(self, rows: Sequence[tuple[Row | None, Row | None]]) -> None:
        """Fire the BEFORE triggers for each (old, new) row, in order."""
        self._fire(self._before, rows)

    def after(self, rows: Sequence[tuple[Row | None, Row | None]]) -> None:
        """Fire the AFTER triggers for each (old, new) row, in order."""
        self._fire(self._after, rows)

    def _fire(self, triggers: list[Trigger], rows: Sequence[tuple[Row | None, Row | None]]) -> None:
        if not triggers or not rows:
            return
        access = self._context.access
        for trigger in triggers:
            if access.user_id(trigger.definer) != trigger.definer_id:
                raise Forbidden(
                    f"trigger '{trigger.name}' on table '{trigger.table}' runs as user"
                    f" '{trigger.definer}', who made it and has been dropped (a user of that"
                    " name now is another); an administrator drops the trigger or makes it"
                    " again"
                )
        contexts = [
            RoutineContext(
                self._context,
                self._txn,
                _definer(t.definer),
                f"trigger '{t.name}' on table '{t.table}'",
            )
            for t in triggers
        ]
        blank = (None,) * len(self._types)
        for old, new in rows:
            params = [as_parameter(v, k) for v, k in zip(old or blank, self._types, strict=True)]
            params += [as_parameter(v, k) for v, k in zip(new or blank, self._types, strict=True)]
            for trigger, context in zip(triggers, contexts, strict=True):
                try:
                    if trigger.when is not None:
                        answer = self._run(context, trigger.when, "", params)
                        if answer.rows[0][0] is not True:
                            continue
                    run_body(context, trigger.body, params, self._run)
                except KdbError as error:
                    name_error(error, f"trigger '{trigger.name}' on table '{trigger.table}'")
                    raise


def _definer(name: str) -> Principal:
    return Principal(name, name.lower() == ADMIN_USER)


def row_triggers(
    context: StatementContext,
    txn: Transaction,
    table: str,
    event: str,
    run_statement: RunStatement,
    assigned: Sequence[str] = (),
) -> Firing | None:
    """The triggers a change of `event` to `table` fires, or None when it fires none.

    `assigned` are an UPDATE's SET columns: a trigger `UPDATE OF cols` fires when one of
    them is named there (SQLite's rule), whether or not the value changes.
    """
    stored = triggers_of(context)
    if not stored:
        return None
    key = table.lower()
    schema = txn.table(table).schema
    names = tuple(schema.column_names)
    wanted = {c.lower() for c in assigned}
    chosen = []
    for name in sorted(stored):
        text = stored[name]
        trigger = parse_cached(text).statements[0]
        assert isinstance(trigger, ast.CreateTrigger)
        if trigger.table.lower() != key or trigger.event != event:
            continue
        bound = _bound(text, names)
        if bound.columns and not bound.columns & wanted:
            continue
        chosen.append(bound)
    if not chosen:
        return None
    return Firing(context, txn, schema, chosen, run_statement)
