"""Live queries kept up to date commit by commit: the answer's state, each change applied.

A `Maintainer` holds what one query's answer is made of, at one position of the log: for a
GROUP BY (or an aggregate of the whole table) the state of each group (`live_groups`), for a
plain query the rows the WHERE lets through. Asked for the answer at a later position, it
reads the log records in between and applies their changes to the table it reads: its cost
follows the rows changed and the groups they touch, never the table's size. Answers it
makes carry their difference to the one before (`Delta`), so a subscriber is answered
without comparing two whole answers.

A change it cannot apply makes it read the table again once, at that commit (a rebuild,
what a fresh run costs): a schema change of the table, a record too far back, and, for an
aggregate of a table without before-images, an update or delete (it cannot know the row
that left). `admits` says which queries are maintained at all (spec: subscribe).
"""

from __future__ import annotations

import gc
import itertools
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from refimpl.engine.features.live_answers import Delta, Identity, LiveAnswer
from refimpl.engine.features.live_groups import KEPT, Group, Slot
from refimpl.engine.features.live_shape import identity_positions
from refimpl.engine.features.live_window import Window, sort_key
from refimpl.engine.features.recent_records import records_through
from refimpl.engine.query.access_path import plan_access
from refimpl.engine.query.cache_keys import deterministic
from refimpl.engine.query.compiled import Scope, ScopeColumn
from refimpl.engine.query.deadlines import make_way
from refimpl.engine.query.expressions import (
    compile_expression,
    contains_aggregate,
    distinct_aggregate_calls,
)
from refimpl.engine.query.names import canonical
from refimpl.engine.query.relations import bounded
from refimpl.engine.query.select import column_name, sort_rows
from refimpl.engine.storage import records, values
from refimpl.engine.storage.table import Table, parts_for_period_range
from refimpl.errors import Gone
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.storage.database import Database

# Beyond this many log records since its last answer, reading the table again is cheaper.
MAX_RECORDS = 10_000
WAY_ROWS = 256  # rows taken in between two looks at whether others' threads are due
LONG_LIVED = 100_000  # rows of a state read from the table that the collector is spared
_UNKNOWN: Any = object()  # a row before a change that the log does not hold
Order = Callable[[Any], Any]


class NotMaintained(Exception):
    """The query is answered by running it again; the message says why."""


class Maintainer:
    """One query's answer kept up to date (thread-safe): see the module docstring."""

    def __init__(
        self,
        database: Database,
        select: ast.Select,
        table: Table,
        functions: Mapping[str, Any],
        max_rows: int,
    ) -> None:
        schema = table.schema
        self.database = database
        self.table = schema.name.lower()
        self.schema = schema
        self.max_rows = max_rows
        self._place = table.place
        self._names = [c.name.lower() for c in schema.columns]
        self._key_positions = table.layout.key_positions
        self._keyed = table.keyed
        self._retracts = schema.replica_identity_full
        self.lock = threading.Lock()
        source = select.source
        assert isinstance(source, ast.TableSource)
        calls = {n.name for n in ast.walk(select) if isinstance(n, ast.FuncCall)}
        if not deterministic(select) or not calls.isdisjoint(functions):
            raise NotMaintained("its answer moves without a commit")
        if select.distinct:
            raise NotMaintained("DISTINCT is run again")
        scope = Scope(
            columns=[ScopeColumn(i, c.type, c.name) for i, c in enumerate(schema.columns)],
            qualifiers=frozenset({(source.alias or schema.name).lower()}),
            functions=functions,
            clause="WHERE",
        )
        self._hints = plan_access(select.where, schema, scope)
        if self._hints.index is not None:
            raise NotMaintained("its WHERE reads through an index, in the index's order")
        where = None if select.where is None else compile_expression(select.where, scope)
        self._where = None if where is None else where.fn
        items = _expanded(select.items, schema.columns)
        self._size: int | None = None  # an ordered window's rows: OFFSET + LIMIT
        self._positions = identity_positions(select, schema.key_columns)
        self.grouped = bool(select.group_by) or any(
            contains_aggregate(e)
            for e in [*(i.expr for i in items), *(o.expr for o in select.order_by)]
        )
        if self.grouped:
            if select.limit is not None or select.offset is not None:
                raise NotMaintained("LIMIT and OFFSET of groups are run again")
            self._compile_grouped(select, items, scope)
        else:
            self._compile_plain(select, items, scope)
        self.dead = False  # the table changed shape: answered by runs from now on
        self._stale = True  # read the table before the next answer
        self.position = 0
        self._rowid_mark = 0
        self._answer: LiveAnswer | None = None
        self._groups: dict[tuple, Group] = {}
        self._outputs: dict[tuple, tuple] = {}  # group key -> wide row, in answer order
        self._touched: dict[tuple, None] = {}
        self._window = Window(self._size)  # plain: the rows, in the query's order
        self._dirty = False
        self.held = 0  # rows this maintainer keeps something of (for the memory bound)
        self.rebuilds = 0  # times it read the table

    # -- compiling (as `refimpl.engine.query.select` compiles the same query) -----------

    def _compile_grouped(
        self, select: ast.Select, items: list[ast.SelectItem], scope: Scope
    ) -> None:
        if not self._retracts and self._keyed:
            raise NotMaintained(
                "its table has a key and no before-images: a logged upsert does not say"
                " which row it replaced"
            )
        aliases = {item.alias.lower(): item.expr for item in items if item.alias}
        group_exprs: list[ast.Expr] = []
        for expr in select.group_by:
            if isinstance(expr, ast.Literal) and expr.type == "INT":
                expr = items[int(expr.value) - 1].expr  # type: ignore[call-overload]
            elif isinstance(expr, ast.ColumnRef) and expr.table is None:
                lowered = expr.name.lower()
                if lowered not in self._names and lowered in aliases:
                    expr = aliases[lowered]
            group_exprs.append(canonical(expr, scope))
        names = [column_name(item) for item in items]
        items = [ast.SelectItem(canonical(i.expr, scope), i.alias) for i in items]
        having = None if select.having is None else canonical(select.having, scope)
        orders = [
            ast.OrderItem(canonical(o.expr, scope), o.descending, o.nulls_first)
            for o in select.order_by
        ]
        scope.clause = "GROUP BY"
        group_keys = [compile_expression(e, scope) for e in group_exprs]
        self._key_fns = [k.fn for k in group_keys]
        sites = [i.expr for i in items] + [o.expr for o in orders]
        calls = distinct_aggregate_calls([*sites, having])
        scope.clause = "an aggregate"
        self._slots = [self._slot(call, scope) for call in calls]
        self._ordered = any(s.floats or s.name in ("first", "last") for s in self._slots)
        slots: dict[ast.Expr, tuple[int, str]] = {}
        for index, (expr, key) in enumerate(zip(group_exprs, group_keys, strict=True)):
            slots.setdefault(expr, (index, key.type))
        for index, (call, slot) in enumerate(zip(calls, self._slots, strict=True)):
            slots[call] = (len(group_exprs) + index, slot.type)
        group_scope = Scope(
            columns=[],
            qualifiers=scope.qualifiers,
            slots=slots,
            functions=scope.functions,
            clause="the select list",
        )
        self._fns = [compile_expression(i.expr, group_scope).fn for i in items]
        self._having = None if having is None else compile_expression(having, group_scope).fn
        self._width = len(slots) + 1
        self._order_fns = self._orders(orders, items, names, group_scope, self._width)
        self._whole_table = not group_exprs
        # Rows keep their places when only values change: the ORDER BY reads only the keys.
        key_items = set(self._positions or ())
        self._keys_order = all(_output_index(o.expr, items, names) in key_items for o in orders)

    def _slot(self, call: ast.FuncCall, scope: Scope) -> Slot:
        if call.name not in KEPT or call.distinct:
            raise NotMaintained(f"{call.name}() is run again")
        if call.star:
            return Slot("count", None, "BIGINT")
        argument = compile_expression(call.args[0], scope)
        if call.name in ("sum", "avg") and argument.type not in values.NUMERIC_TYPES:
            raise NotMaintained(f"{call.name}() of {argument.type} is run again")
        floats = call.name in ("sum", "avg") and argument.type == "DOUBLE"
        type_ = argument.type
        if call.name == "count":
            type_ = "BIGINT"
        elif call.name == "sum":
            type_ = "DOUBLE" if floats else "BIGINT"
        elif call.name == "avg":
            type_ = "DOUBLE"
        timeseries = self.schema.timeseries
        time = None if timeseries is None else self.schema.position(timeseries)
        return Slot(call.name, argument.fn, type_, floats, self._retracts, time)

    def _compile_plain(self, select: ast.Select, items: list[ast.SelectItem], scope: Scope) -> None:
        scope.clause = "the select list"
        self._fns = [compile_expression(i.expr, scope).fn for i in items]
        self._width = len(self._names)
        names = [column_name(item) for item in items]
        self._order_fns = self._orders(list(select.order_by), items, names, scope, self._width)
        self._sort_key = sort_key(self._order_fns)
        self._limit = _constant(select.limit)
        self._offset = _constant(select.offset) or 0
        self._size = None if self._limit is None else self._offset + self._limit

    @staticmethod
    def _orders(
        orders: list[ast.OrderItem],
        items: list[ast.SelectItem],
        names: list[str],
        scope: Scope,
        width: int,
    ) -> list[tuple[Order, ast.OrderItem]]:
        """ORDER BY as `sort_rows` takes it, over wide rows (what the items read, then the
        answer's row)."""
        result: list[tuple[Order, ast.OrderItem]] = []
        for order in orders:
            index = _output_index(order.expr, items, names)
            if index is not None:
                result.append((_item_at(width + index), order))
            else:
                scope.clause = "ORDER BY"
                result.append((compile_expression(order.expr, scope).fn, order))
        return result

    # -- answering -----------------------------------------------------------------------

    def answer(
        self,
        deadline: float | None,
        applied: int,
        token: int,
        serial: Callable[[], int],
    ) -> LiveAnswer | None:
        """The answer including every commit up to `applied` (maybe more, and maybe not yet
        durable: its caller shows it only once the commits applied by then are), marked
        with (`applied`, `token`); None when this query is run instead (its table changed
        shape, or its answer has more than `max_rows` rows)."""
        with self.lock:
            if self.dead:
                return None
            try:
                if self._stale or (self.position < applied and not self._catch_up(applied)):
                    self._rebuild(deadline)
                    if self.dead:
                        return None
                return self._make(applied, token, serial)
            except BaseException:
                self._stale = True  # half applied: read the table again next time
                raise

    def _make(self, applied: int, token: int, serial: Callable[[], int]) -> LiveAnswer | None:
        previous = self._answer
        if previous is not None and not self._touched and not self._dirty:
            return LiveAnswer(previous.serial, previous.rows, applied, token, previous.delta)
        delta = None
        if self.grouped and self._positions is not None and previous is not None:
            rows, delta = self._grouped_rows(previous)
        else:
            rows = self._whole_answer()
        self._touched = {}
        self._dirty = False
        if len(rows) > self.max_rows:
            self._answer = None
            return None
        if delta is not None and not delta.changed and not delta.removed and previous:
            answer = LiveAnswer(previous.serial, rows, applied, token, previous.delta)
        else:
            answer = LiveAnswer(serial(), rows, applied, token, delta)
        self._answer = answer
        return answer

    def _output(self, key: tuple) -> tuple | None:
        """The wide row of group `key` (its slots, then the answer's row), None if none."""
        group = self._groups.get(key)
        if group is None or (group.rows == 0 and not self._whole_table):
            return None
        row = (*key, *group.finals(self._slots))
        if self._having is not None and self._having(row) is not True:
            return None
        return (*row, *([None] * (self._width - len(row))), *(fn(row) for fn in self._fns))

    def _grouped_rows(self, previous: LiveAnswer) -> tuple[dict[Identity, tuple], Delta]:
        """The answer after the touched groups changed, from `previous`, and the delta."""
        width, positions = self._width, self._positions
        assert positions is not None
        rows = dict(previous.rows)
        changed: list[Identity] = []
        removed: list[Identity] = []
        added: list[tuple] = []  # keys of new groups, last in `outputs` and `rows` for now
        outputs = self._outputs
        for key in self._touched:
            before = outputs.get(key)
            wide = self._output(key)
            if wide is None:
                if before is not None:
                    del outputs[key]
                    ident = tuple(before[width + p] for p in positions)
                    del rows[ident]
                    removed.append(ident)
                continue
            outputs[key] = wide  # a group already there keeps its place
            row = wide[width:]
            ident = tuple(row[p] for p in positions)
            if before is None:
                added.append(key)
            elif before[width:] == row:
                continue
            rows[ident] = row
            changed.append(ident)
        if self._order_fns and (added or (changed and not self._keys_order)):
            if not (self._keys_order and self._appended(added, rows)):
                ordered = sort_rows(list(outputs.values()), self._order_fns)
                self._outputs = {tuple(w[: len(self._key_fns)]): w for w in ordered}
                rows = {tuple(w[width + p] for p in positions): w[width:] for w in ordered}
        if len(changed) > 1:
            wanted = set(changed)
            changed = [ident for ident in rows if ident in wanted]
        return rows, Delta(previous.serial, changed, removed)

    def _appended(self, added: list[tuple], rows: dict[Identity, tuple]) -> bool:
        """Put the new groups `added` (last in the answer) in order after the others, when
        they all sort after them (a new minute's candle); False when they do not."""
        outputs, width, positions = self._outputs, self._width, self._positions
        assert positions is not None
        tail = sort_rows([outputs[key] for key in added], self._order_fns)
        fresh = set(added)
        last = next((key for key in reversed(outputs) if key not in fresh), None)
        if last is not None:
            pair = [outputs[last], tail[0]]
            if sort_rows(list(pair), self._order_fns)[0] is not pair[0]:
                return False
        for wide in tail:  # taken out and put back in their order
            key = tuple(wide[: len(self._key_fns)])
            del outputs[key]
            outputs[key] = wide
            ident = tuple(wide[width + p] for p in positions)
            row = rows.pop(ident)
            rows[ident] = row
        return True

    def _whole_answer(self) -> dict[Identity, tuple]:
        """The answer made whole from the state: rows in the query's order, by identity."""
        width = self._width
        if self.grouped:
            wide = [w for w in map(self._output, self._groups) if w is not None]
            if self._order_fns:
                wide = sort_rows(wide, self._order_fns)
            self._outputs = {tuple(w[: len(self._key_fns)]): w for w in wide}
        else:
            wide = self._window.wide_rows()
            if self._offset or self._limit is not None:
                end = None if self._limit is None else self._offset + self._limit
                wide = wide[self._offset : end]
        rows: dict[Identity, tuple] = {}
        positions = self._positions
        if positions is None:
            seen: dict[tuple, int] = {}
            for w in wide:
                row = w[width:]
                count = seen.get(row, 0)
                seen[row] = count + 1
                rows[(*row, count)] = row  # equal rows stay apart by their number
        else:
            for w in wide:
                row = w[width:]
                rows[tuple(row[p] for p in positions)] = row
        return rows

    # -- the state from the table --------------------------------------------------------

    def _rebuild(self, deadline: float | None) -> None:
        database = self.database
        self.rebuilds += 1
        # Under the state lock only the rows are listed (C calls, no step per row): the
        # state is made of them once it is let go, so that a commit, and every reader
        # queued behind it, never waits for a whole table's rows to be taken in (seconds
        # for an ordered window over 300,000 rows). Rows are tuples that no commit
        # changes: the lists are the table at `position`.
        with database.state_lock:
            table = database.tables.get(self.table)
            if table is None or table.schema is not self.schema:
                self.dead = True
                return
            self.position = database.applied_lsn
            self._rowid_mark = table.next_rowid
            listed = self._listed(table)
        self._groups = {}
        self._outputs = {}
        if not self.grouped:
            self._window = Window(self._size)
        self.held = 0
        if self.grouped and self._whole_table:
            self._groups[()] = Group(self._slots)
        count = len(self._key_positions) or 1
        rows = itertools.chain.from_iterable(
            zip(itertools.repeat(part), orders, part_rows) for part, orders, part_rows in listed
        )
        for taken, (part, order, row) in enumerate(bounded(rows, deadline)):
            if not taken % WAY_ROWS:
                make_way()  # the asking client's work: others' answers run between its turns
            self._join(row, order[-count:], (part, order))
        self._answer = None
        self._touched = {}
        self._dirty = True
        self._stale = False
        if self.held >= LONG_LIVED:
            # Kept until the table changes shape, holding no cycle: out of the collector's
            # later passes, each of which would go over all of it again (a pause of every
            # thread).
            gc.freeze()

    def _listed(self, table: Table) -> list[tuple[tuple, list[tuple], list[tuple]]]:
        """(partition, its orders, their rows) of the rows the WHERE may keep, in table
        order; the caller holds the state lock. Listed by C calls: a partition's orders
        from its sorted keys, their rows by the dict's own lookup."""
        hints = self._hints
        if hints.ident is not None:
            where = table.index.get(hints.ident)
            if where is None:
                return []
            return [(where[0], [where[1]], [table.partitions[where[0]][where[1]]])]
        if hints.low_period is not None or hints.high_period is not None or hints.symbol:
            parts = parts_for_period_range(table, hints.low_period, hints.high_period, hints.symbol)
        else:
            # Every partition, by the sorted keys' own iterator (C): `keys()` is a view
            # whose iteration is Python's, an opcode or two a partition.
            parts = list(table.partitions)
        low, high = table.lead_range(hints.lead_low, hints.lead_high)
        listed = []
        for part in parts:
            partition = table.partitions.get(part)
            if partition is None:
                continue
            if low is not None or high is not None:
                orders = list(partition.irange(low, high, inclusive=(True, False)))
            else:
                orders = list(partition)
            listed.append((part, orders, partition.rows_for(orders)))
        return listed

    # -- changes from the log ------------------------------------------------------------

    def _catch_up(self, applied: int) -> bool:
        """Apply the log's records after `position` up to `applied` (from memory, not yet
        durable maybe: `answer`); False: read the table."""
        try:
            logged = records_through(self.database.log, self.position, applied)
            for count, (lsn, payload) in enumerate(logged, start=1):
                if lsn > applied:
                    break
                if count > MAX_RECORDS:
                    return False
                for entry in records.decode(lsn, payload).entries:
                    if entry.table is None or entry.table.lower() != self.table:
                        continue
                    if not self._apply(entry):
                        return False
                if not self.grouped and self._window.short:
                    return False  # a row left the window and only the table knows the next
                self.position = lsn
        except Gone:
            return False
        self.position = max(self.position, applied)
        return True

    def _apply(self, entry: records.Entry) -> bool:
        before = entry.before
        if before is not None and [c.lower() for c in before.columns] != self._names:
            return False
        olds = None if before is None else before.rows
        if entry.kind == records.UPSERT:
            columns, rows, rowids = entry.payload
            if [c.lower() for c in columns] != self._names:
                return False
            for at, row in enumerate(rows):
                if rowids is None:
                    ident = tuple(row[p] for p in self._key_positions)
                    old = _UNKNOWN if olds is None else olds[at]
                else:
                    ident = (rowids[at],)
                    old = _UNKNOWN if olds is None else olds[at]
                    if old is _UNKNOWN and rowids[at] >= self._rowid_mark:
                        old = None  # a new row id: an insert
                    self._rowid_mark = max(self._rowid_mark, rowids[at] + 1)
                if not self._leave(ident, old):
                    return False
                self._join(row, ident, None)
            return True
        if entry.kind == records.DELETE:
            for at, (_part, ident) in enumerate(entry.payload[0]):
                if not self._leave(tuple(ident), _UNKNOWN if olds is None else olds[at]):
                    return False
            return True
        return False  # a schema change: the table is read again, the query compiled again

    def _join(self, row: Any, ident: tuple, place: tuple | None) -> None:
        """Take in a row of the table (its identity; its place in table order if known)."""
        if self._where is not None and self._where(row) is not True:
            return
        if self.grouped:
            order = None
            if self._ordered:
                order = place if place is not None else self._place(row, ident)
                self.held += 1
            key = tuple(fn(row) for fn in self._key_fns)
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = Group(self._slots)
            group.add(self._slots, row, order)
            self._touched[key] = None
            return
        order = place if place is not None else self._place(row, ident)
        row = tuple(row)
        wide = (*row, *(fn(row) for fn in self._fns))
        self._window.add(ident, self._sort_key(wide, order), wide)
        self.held = len(self._window)
        self._dirty = True

    def _leave(self, ident: tuple, old: Any) -> bool:
        """Let the row of `ident` go (`old`: the row as it was, None if there was none,
        _UNKNOWN when the log does not say); False when that cannot be done."""
        if not self.grouped:
            if self._window.remove(ident):
                self.held = len(self._window)
                self._dirty = True
            return True
        if old is None:
            return True
        if old is _UNKNOWN:
            return False
        if self._where is not None and self._where(old) is not True:
            return True
        key = tuple(fn(old) for fn in self._key_fns)
        group = self._groups.get(key)
        if group is None:
            return False
        order = self._place(old, ident) if self._ordered else None
        group.remove(self._slots, old, order)
        if self._ordered:
            self.held -= 1
        if group.rows == 0 and not self._whole_table:
            del self._groups[key]
        self._touched[key] = None
        return True


def _expanded(items: tuple[ast.SelectItem, ...], columns: Any) -> list[ast.SelectItem]:
    """The select list with `*` as the table's columns."""
    result: list[ast.SelectItem] = []
    for item in items:
        if isinstance(item.expr, ast.Star):
            result += [ast.SelectItem(ast.ColumnRef(c.name)) for c in columns]
        else:
            result.append(item)
    return result


def _output_index(expr: ast.Expr, items: list[ast.SelectItem], names: list[str]) -> int | None:
    """ORDER BY 2, ORDER BY alias, or ORDER BY an expression of the select list."""
    if isinstance(expr, ast.Literal) and expr.type == "INT":
        return int(expr.value) - 1  # type: ignore[call-overload]
    if isinstance(expr, ast.ColumnRef) and expr.table is None:
        lowered = expr.name.lower()
        for index, name in enumerate(names):
            if name.lower() == lowered:
                return index
    for index, item in enumerate(items):
        if item.expr == expr:
            return index
    return None


def _constant(expr: ast.Expr | None) -> int | None:
    """The value of a LIMIT or OFFSET (None: none); other expressions are run again."""
    if expr is None:
        return None
    if isinstance(expr, ast.Literal) and expr.type == "INT" and int(expr.value) >= 0:  # type: ignore[call-overload]
        return int(expr.value)  # type: ignore[call-overload]
    raise NotMaintained("a LIMIT or OFFSET other than a number is run again")


def _item_at(index: int) -> Order:
    return lambda row: row[index]
