"""A prepared one-row INSERT (`INSERT INTO t [(cols)] VALUES (...)`), run again and again.

What `executor.execute` does for such a statement, without what it works out again at each
run: the row's values are taken from the parameters and literals by a list chosen once, and
the table's column positions, types and names for the row are found once per schema object
(a schema change makes a new one, and so a new shape). What is never done once for all: the
right to write (checked at each run), the table's triggers (looked up at each run: a
CREATE TRIGGER reaches the next run), the key and UNIQUE checks, DEDUP, the indexes, the
memory count and the commit with its durability, which are `executor.insert_values`' and
the session's, as for every other INSERT.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from refimpl.engine.result import Result, message_result
from refimpl.engine.rights import WRITE
from refimpl.engine.statements import executor
from refimpl.engine.statements.kept_rows import MOST_VALUES, KeptRow, kept_row
from refimpl.engine.statements.triggers import row_triggers
from refimpl.engine.storage import values
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Ident, Row, Table
from refimpl.engine.storage.transaction import Transaction
from refimpl.errors import DuplicateKey, SqlError
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

_ONE_ROW = "1 row(s) inserted"  # what `executor` answers for one row
_DOUBLE_MAX = sys.float_info.max
# A column type whose value of one Python type `values.coerce` keeps as it is when it lies
# within the bounds (a finite float; any text): that type and those bounds. Other values
# (an integer for a DOUBLE, a TIMESTAMP) and those out of bounds go through `coerce`, which
# converts them or says what is wrong.
_KEPT_AS_THEY_ARE: dict[str, tuple[type, Any, Any]] = {
    "INT": (int, values.INT_MIN, values.INT_MAX),
    "BIGINT": (int, values.BIGINT_MIN, values.BIGINT_MAX),
    "DOUBLE": (float, -_DOUBLE_MAX, _DOUBLE_MAX),  # inf and NaN fall outside
    "STRING": (str, None, None),
    "SYMBOL": (str, None, None),
}


def runs_one_row(statement: ast.Statement) -> bool:
    """Whether `statement` is an INSERT that `PreparedInsert` runs: one VALUES row of
    parameters and literals, no RETURNING (anything else runs as `executor.execute` runs
    it)."""
    return (
        type(statement) is ast.Insert
        and statement.select is None
        and not statement.returning
        and statement.rows is not None
        and len(statement.rows) == 1
        and all(type(e) in (ast.Param, ast.Literal) for e in statement.rows[0])
    )


class _Shape:
    """The row's place in one schema object's columns, made once for it."""

    __slots__ = ("schema", "types", "width", "positions", "checks", "kept", "key_of", "not_null")

    def __init__(self, schema: TableSchema, columns: Sequence[str] | None) -> None:
        self.schema = schema
        self.width = len(schema.columns)
        # None: the values are the table's columns in order (the row is the values).
        self.positions: list[int] | None
        if columns is None:
            positions = list(range(self.width))
        else:
            positions = [schema.position(name) for name in columns]  # UnknownColumn as before
            if len(set(positions)) != len(positions):
                raise SqlError("a column is named twice in the INSERT column list")
        self.positions = None if positions == list(range(self.width)) else positions
        self.types = [(schema.columns[p].type, schema.columns[p].name) for p in positions]
        # Each value's (Python type, low, high, column type, name): kept as it is when of
        # that type and within [low, high] (text: always), else converted by `coerce`.
        self.checks = [
            (*_KEPT_AS_THEY_ARE.get(column_type, (None, None, None)), column_type, name)
            for column_type, name in self.types
        ]
        layout = schema.layout()
        # The row when every value is kept as it is, by code made for this shape (None:
        # none is made, the values are converted the general way). Only where such values
        # make a row that passes NOT NULL: a kept value is never NULL, so every NOT NULL
        # column must be among those given.
        kept = [_KEPT_AS_THEY_ARE.get(column_type) for column_type, _ in self.types]
        self.kept: KeptRow | None = None
        if (
            0 < len(kept) <= MOST_VALUES
            and all(check is not None for check in kept)
            and {position for position, _ in layout.not_null} <= set(positions)
        ):
            checks = tuple(check for check in kept if check is not None)
            self.kept = kept_row(checks, tuple(positions), self.width)
        # A row's identity (None: row ids) and its values that must not be NULL, each taken
        # by one C call, where `Table.ident_of` and `check_not_null` step through positions
        # in Python; a key of one column is a slice of the row: a tuple, as an identity is.
        keys = layout.key_positions
        self.key_of: Callable[[Row], Ident] | None = None
        if len(keys) == 1:
            self.key_of = itemgetter(slice(keys[0], keys[0] + 1))
        elif keys:
            self.key_of = itemgetter(*keys)
        not_null = [position for position, _ in layout.not_null]
        # The first twice, so that the values come as a tuple however many there are.
        self.not_null = itemgetter(*not_null, *not_null[:1]) if not_null else None


class PreparedInsert:
    """`executor.execute` of a one-row INSERT (`runs_one_row`), run again and again. Threads
    may share one: what it keeps is one `_Shape`, replaced whole."""

    __slots__ = ("_shape", "_sources", "_needs", "_in_order", "_columns")

    def __init__(self, statement: ast.Insert) -> None:
        assert statement.rows is not None
        # (True, parameter index) or (False, literal value), for each value of the row.
        self._sources: list[tuple[bool, Any]] = [
            (True, e.index) if isinstance(e, ast.Param) else (False, e.value)
            for e in statement.rows[0]
            if isinstance(e, ast.Param | ast.Literal)
        ]
        self._shape: _Shape | None = None
        # How many parameters a run needs (its highest `?` index, plus one).
        self._needs = 1 + max((i for is_param, i in self._sources if is_param), default=-1)
        # The values are the parameters as they come ($1, $2, ... and nothing else).
        self._in_order = self._sources == [(True, i) for i in range(len(self._sources))]
        self._columns = statement.columns  # a handler runs only the statement it was made of

    def __call__(
        self, context: StatementContext, statement: ast.Insert, text: str, params: Sequence[Any]
    ) -> Result:
        context.authorize(WRITE, statement.table)
        if len(params) < self._needs:
            return executor.execute(context, statement, text, params)  # says what is missing
        if self._in_order:
            source = list(params[: self._needs])
        else:
            source = [params[i] if is_param else i for is_param, i in self._sources]
        # Without a transaction's overlay when it can (no DEDUP, trigger or secondary index:
        # the session says), by a method and its argument rather than a closure made a run.
        if context.insert_new_row(statement.table, self._new, source):
            return message_result(text, _ONE_ROW, 1)

        def run(txn: Transaction) -> Result:
            work = txn.table(statement.table)
            table = work.current()
            firing = row_triggers(context, txn, statement.table, "INSERT", executor.execute)
            if firing is not None or table.schema.dedup_key:
                executor.insert_values(
                    work, table.schema, statement.columns, [source], context.deadline(), firing
                )
                return message_result(text, _ONE_ROW, 1)
            ident, row = self._new(table, source, work.get)
            work.change({ident: row})
            return message_result(text, _ONE_ROW, 1)

        return context.write(run)

    def _new(
        self,
        table: Table,
        source: list[Any],
        get: Callable[[Ident], Row | None] | None = None,
    ) -> tuple[Ident, Row]:
        """The row of `source` in `table`'s columns, its values converted to their types,
        and its identity: its key, or a row id of its own. SqlError as `executor` raises it
        (a wrong count, a value that does not convert, a NULL key), DuplicateKey when `get`
        (what the writer sees of the table; None: the committed `table` itself) finds the
        key."""
        schema = table.schema
        shape = self._shape
        if shape is None or shape.schema is not schema:
            shape = self._shape = _Shape(schema, self._columns)
        if len(source) != len(shape.types):
            raise SqlError(
                f"row 1 has {len(source)} value(s) but {len(shape.types)} column(s) are"
                " being inserted"
            )
        kept = shape.kept
        row = None if kept is None else kept(source)
        if row is None:  # a value to convert (or to refuse), or no code made for the shape
            row = self._converted(table, shape, source)
        key_of = shape.key_of
        if key_of is None:
            return (table.allocate_rowid(),), row
        ident = key_of(row)
        # The committed table's index holds the identities of its rows: a look-up in it
        # (a dict's, most often: in C) says what `Table.get`'s call would.
        if (ident in table.index) if get is None else (get(ident) is not None):
            raise DuplicateKey(schema.name, ident[0] if len(ident) == 1 else ident)
        return ident, row

    @staticmethod
    def _converted(table: Table, shape: _Shape, source: list[Any]) -> Row:
        """The row of `source` (its count checked), each value not kept as it is converted
        by `values.coerce`; SqlError as `coerce` or the NOT NULL check raises it."""
        coerce = values.coerce
        converted = [
            v
            if type(v) is kind and (low is None or low <= v <= high)
            else coerce(v, column_type, name)
            for v, (kind, low, high, column_type, name) in zip(source, shape.checks, strict=True)
        ]
        if shape.positions is None:
            row = tuple(converted)
        else:
            slots: list[Any] = [None] * shape.width
            for position, value in zip(shape.positions, converted, strict=True):
                slots[position] = value
            row = tuple(slots)
        if shape.not_null is not None and None in shape.not_null(row):
            table.check_not_null(row)  # says which column
        return row
