"""Model-based test of the engine: random statements against a plain-Python model.

A Hypothesis state machine runs statements on three tables and keeps, in plain Python, what
the committed tables (and an open transaction's view of them) must hold:

- `pk`: a PRIMARY KEY table (duplicate inserts fail; UPDATEs move keys, collisions fail);
- `ts`: a TIMESERIES table PARTITION BY DAY, SYMBOL(sym) with DEDUP KEY (sym, time) (inserts
  of a taken key replace the row; UPDATEs move rows between partitions);
- `nk`: a table without any key (equal rows allowed, read in insertion order).

A failing statement must change nothing, and inside BEGIN ... COMMIT it rolls the whole
transaction back. After every step each table, read with `SELECT *` in its natural order by
the writing session (which sees its open transaction) and by a second session (which sees only
committed state), equals the model. At random points the connection is closed and reopened
from disk, sometimes right after a CHECKPOINT, and must still equal the model. Small log
segments, a small archive and a small checkpoint threshold make background checkpoints and
log trimming happen within a short run.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import refimpl
from refimpl.engine.options import EngineOptions
from refimpl.engine.result import Result
from refimpl.errors import (
    DuplicateColumn,
    DuplicateKey,
    KdbError,
    NotNullViolation,
    SqlError,
    UnknownColumn,
)

HOUR = 3_600_000_000
DAY = 24 * HOUR
BASE = int(datetime(2026, 9, 24, tzinfo=UTC).timestamp()) * 1_000_000
TIMES = [BASE + d * DAY + h * HOUR for d in range(3) for h in range(0, 24, 8)]
SYMBOLS = ["A", "B", "C"]

VALUES: dict[str, list[Any]] = {
    "INT": [None, -2, 0, 1, 2, 3, 7],
    "BIGINT": [None, 0, 5, 2**40],
    "DOUBLE": [None, -1.5, 0.0, 2.0, 3.25],
    # A long value makes the log grow fast enough for background checkpoints and trims.
    "STRING": [None, "", "a", "b", "it's", "Zürich", "long " * 400],
    "SYMBOL": [None, "A", "B", "x"],
    "BOOLEAN": [None, True, False],
}
ADDED_TYPES = ["INT", "DOUBLE", "STRING", "BOOLEAN", "BIGINT"]

CREATE = {
    "pk": "CREATE TABLE pk (id INT PRIMARY KEY, v INT, s STRING)",
    "ts": (
        "CREATE TABLE ts (time TIMESTAMP, sym SYMBOL, v INT) TIMESERIES(time)"
        " PARTITION BY DAY, SYMBOL(sym) DEDUP KEY (sym, time)"
    ),
    "nk": "CREATE TABLE nk (a INT, b STRING)",
}
BASE_COLUMNS = {
    "pk": [("id", "INT"), ("v", "INT"), ("s", "STRING")],
    "ts": [("time", "TIMESTAMP"), ("sym", "SYMBOL"), ("v", "INT")],
    "nk": [("a", "INT"), ("b", "STRING")],
}
KEYS = {"pk": ("id",), "ts": ("sym", "time"), "nk": ()}
# Columns that cannot be dropped (key, TIMESERIES, SYMBOL partition) and that are NOT NULL.
PROTECTED = {"pk": {"id"}, "ts": {"sym", "time"}, "nk": set()}
NOT_NULL = PROTECTED


class ModelError(Exception):
    """The statement must fail with this engine error class and change nothing."""

    def __init__(self, kind: type[KdbError]) -> None:
        super().__init__(kind.__name__)
        self.kind = kind


@dataclass
class TableModel:
    name: str
    columns: list[tuple[str, str]]
    # keyed tables: ident -> row; the keyless table: row id -> row (natural order = row id)
    rows: dict[Any, tuple] = field(default_factory=dict)
    next_rowid: int = 1

    @property
    def keyed(self) -> bool:
        return bool(KEYS[self.name])

    @property
    def dedup(self) -> bool:
        return self.name == "ts"

    def names(self) -> list[str]:
        return [name for name, _ in self.columns]

    def position(self, name: str) -> int:
        names = self.names()
        if name not in names:
            raise ModelError(UnknownColumn)
        return names.index(name)

    def ident(self, row: tuple) -> tuple:
        return tuple(row[self.position(k)] for k in KEYS[self.name])

    def check_not_null(self, row: tuple) -> None:
        for name in NOT_NULL[self.name]:
            if row[self.position(name)] is None:
                raise ModelError(NotNullViolation)

    def ordered(self) -> list[tuple]:
        """The rows in the order `SELECT *` reads them without ORDER BY."""
        if self.name == "pk":
            return [self.rows[k] for k in sorted(self.rows)]
        if self.name == "ts":
            t, s = self.position("time"), self.position("sym")
            return sorted(self.rows.values(), key=lambda r: (r[t] // DAY, r[s], r[t]))
        return [self.rows[k] for k in sorted(self.rows)]


def fresh_tables() -> dict[str, TableModel]:
    return {name: TableModel(name, list(BASE_COLUMNS[name])) for name in CREATE}


# Predicates: (SQL text, columns it needs, Python test given (row as dict, parameter)).
PREDICATES: dict[str, list[tuple[str, tuple[str, ...], Any]]] = {
    "pk": [
        ("id = ?", ("id",), lambda r, p: r["id"] == p),
        ("id >= ?", ("id",), lambda r, p: r["id"] >= p),
        ("v > ?", ("v",), lambda r, p: r["v"] is not None and r["v"] > p),
        ("v IS NULL OR id < ?", ("v", "id"), lambda r, p: r["v"] is None or r["id"] < p),
        ("s IS NULL AND id <> ?", ("s", "id"), lambda r, p: r["s"] is None and r["id"] != p),
    ],
    "ts": [
        ("sym = ?", ("sym",), lambda r, p: r["sym"] == SYMBOLS[p % 3]),
        ("time < ?", ("time",), lambda r, p: r["time"] < TIMES[p % len(TIMES)]),
        ("v = ?", ("v",), lambda r, p: r["v"] == p),
        ("v IS NULL", ("v",), lambda r, p: r["v"] is None),
    ],
    "nk": [
        ("a = ?", ("a",), lambda r, p: r["a"] == p),
        (
            "a < ? OR b IS NULL",
            ("a", "b"),
            lambda r, p: (r["a"] is not None and r["a"] < p) or r["b"] is None,
        ),
        ("b = 'a'", ("b",), lambda r, p: r["b"] == "a"),
    ],
}


def predicate_param(table: str, text: str, p: int) -> Any:
    """The SQL parameter for a predicate drawn with integer p."""
    if table == "ts" and text.startswith("sym"):
        return SYMBOLS[p % 3]
    if table == "ts" and text.startswith("time"):
        return iso(TIMES[p % len(TIMES)])
    return p


def iso(micros: int) -> str:
    return datetime.fromtimestamp(micros / 1_000_000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


tables_st = st.sampled_from(sorted(CREATE))
small_int = st.integers(-1, 9)


class EngineModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="kdb-model-"))
        self.path = self.folder / "data"
        self.connection: refimpl.Connection | None = None
        self.committed: dict[str, TableModel] = fresh_tables()
        self.txn: dict[str, TableModel] | None = None
        self.added = 0
        self.reopens = 0

    # -- plumbing ------------------------------------------------------------------------

    def open(self) -> None:
        self.connection = refimpl.connect(self.path, options=self.options)
        self.writer = self.connection.session()
        self.reader = self.connection.session()

    def close(self) -> None:
        if self.connection is not None:
            self.writer.close()
            self.reader.close()
            self.connection.close()
            self.connection = None

    def teardown(self) -> None:
        try:
            self.close()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    @property
    def current(self) -> dict[str, TableModel]:
        return self.txn if self.txn is not None else self.committed

    def run(
        self, sql: str, params: tuple = (), expected: ModelError | None = None
    ) -> Result | None:
        """Run a statement; it must fail exactly when the model says it does."""
        try:
            result = self.writer.execute(sql, params)
        except KdbError as error:
            if expected is None:
                raise AssertionError(f"{sql} {params} failed: {error!r}") from error
            assert isinstance(error, expected.kind), (sql, params, error, expected.kind)
            # A failed statement rolls an open transaction back.
            assert self.writer.transaction is None
            self.txn = None
            return None
        assert expected is None, f"{sql} {params} should fail with {expected.kind.__name__}"
        return result

    def change(
        self, sql: str, params: tuple, apply: Callable[[dict[str, TableModel]], int | None]
    ) -> None:
        """Run a change statement and apply `apply(tables)` to a copy of the model.

        `apply` returns the statement's expected count (rows inserted, updated, deleted or
        truncated), or None where the count is not checked.
        """
        work = copy.deepcopy(self.current)
        try:
            count = apply(work)
        except ModelError as expected:
            self.run(sql, params, expected)
            return
        result = self.run(sql, params)
        assert result is not None
        if count is not None:
            assert result.count == count, (sql, params, result.message, count)
        if self.txn is not None:
            self.txn = work
        else:
            self.committed = work

    # -- setup ---------------------------------------------------------------------------

    @initialize(
        small=st.booleans(),
    )
    def setup(self, small: bool) -> None:
        if small:
            self.options = EngineOptions(
                segment_bytes=4096,
                wal_archive_bytes=16384,
                checkpoint_bytes=4096,
                statement_timeout=5.0,
            )
        else:
            self.options = EngineOptions(statement_timeout=5.0)
        self.open()
        for sql in CREATE.values():
            self.writer.execute(sql)

    # -- transactions --------------------------------------------------------------------

    @precondition(lambda self: self.txn is None)
    @rule()
    def begin(self) -> None:
        self.run("BEGIN")
        self.txn = copy.deepcopy(self.committed)

    @precondition(lambda self: self.txn is not None)
    @rule()
    def commit(self) -> None:
        self.run("COMMIT")
        assert self.txn is not None
        self.committed, self.txn = self.txn, None

    @precondition(lambda self: self.txn is not None)
    @rule()
    def rollback(self) -> None:
        self.run("ROLLBACK")
        self.txn = None

    # -- INSERT --------------------------------------------------------------------------

    @rule(table=tables_st, data=st.data(), count=st.integers(1, 6), listed=st.booleans())
    def insert(self, table: str, data: st.DataObject, count: int, listed: bool) -> None:
        model = self.current[table]
        columns = list(model.columns)
        if listed:
            columns = data.draw(st.permutations(columns))
            # Sometimes leave a column out (NULL), possibly a NOT NULL one (an error).
            if len(columns) > 1 and data.draw(st.booleans()):
                columns = columns[:-1]
        rows = [tuple(self.draw_value(data, table, n, t) for n, t in columns) for _ in range(count)]
        names = [n for n, _ in columns]
        holes = ", ".join("?" for _ in columns)
        values_sql = ", ".join(f"({holes})" for _ in rows)
        target = f"{table} ({', '.join(names)})" if listed else table
        params = tuple(v for row in rows for v in row)

        def apply(tables: dict[str, TableModel]) -> int:
            m = tables[table]
            changes: dict[Any, tuple] = {}
            for given in rows:
                full = tuple(given[names.index(n)] if n in names else None for n in m.names())
                full = tuple(_stored(v, t) for v, (_, t) in zip(full, m.columns, strict=True))
                m.check_not_null(full)
                if m.keyed:
                    ident = m.ident(full)
                    if not m.dedup and (ident in changes or ident in m.rows):
                        raise ModelError(DuplicateKey)
                    changes[ident] = full
                else:
                    changes[("new", len(changes))] = full
            for ident, row in changes.items():
                if m.keyed:
                    m.rows[ident] = row
                else:
                    m.rows[m.next_rowid] = row
                    m.next_rowid += 1
            return len(rows)

        self.change(f"INSERT INTO {target} VALUES {values_sql}", params, apply)

    def draw_value(self, data: st.DataObject, table: str, name: str, type_: str) -> Any:
        if name == "id":
            return data.draw(st.sampled_from([*range(13), None]))
        if name == "time":
            return data.draw(st.sampled_from(TIMES))
        if name == "sym":
            return data.draw(st.sampled_from(SYMBOLS))
        return data.draw(st.sampled_from(VALUES[type_]))

    # -- UPDATE --------------------------------------------------------------------------

    @rule(table=tables_st, data=st.data(), p=small_int, use_where=st.booleans())
    def update_value(self, table: str, data: st.DataObject, p: int, use_where: bool) -> None:
        model = self.current[table]
        settable = [c for c in model.columns if c[0] not in PROTECTED[table]]
        if not settable:
            return
        column, type_ = data.draw(st.sampled_from(settable))
        value = data.draw(st.sampled_from(VALUES[type_]))
        where = data.draw(st.sampled_from(PREDICATES[table])) if use_where else None
        sql = f"UPDATE {table} SET {column} = ?"
        params: tuple = (value,)
        if where is not None:
            sql += f" WHERE {where[0]}"
            params += (predicate_param(table, where[0], p),) if "?" in where[0] else ()

        def apply(tables: dict[str, TableModel]) -> int:
            m = tables[table]
            position = m.position(column)
            matched = self.matching(m, where, p)
            for ident, row in matched:
                new = list(row)
                new[position] = _stored(value, type_)
                m.rows[ident] = tuple(new)
            return len(matched)

        self.change(sql, params, apply)

    def matching(self, m: TableModel, where, p: int) -> list[tuple[Any, tuple]]:  # noqa: ANN001
        if where is None:
            return list(m.rows.items())
        text, needs, test = where
        for name in needs:
            m.position(name)
        out = []
        for ident, row in m.rows.items():
            as_dict = dict(zip(m.names(), row, strict=True))
            if test(as_dict, p):
                out.append((ident, row))
        return out

    def move(self, table: str, sql: str, params: tuple, where, p: int, new_of) -> None:  # noqa: ANN001
        """An UPDATE of key columns: rows move; a taken key fails (replaces, for DEDUP KEY)."""

        def apply(tables: dict[str, TableModel]) -> int:
            m = tables[table]
            matched = self.matching(m, where, p)
            updates = []
            for ident, row in matched:
                new_row = new_of(m, row)
                m.check_not_null(new_row)
                updates.append((ident, m.ident(new_row), new_row))
            moved_away = {old for old, new, _ in updates if old != new}
            targets = [new for _, new, _ in updates]
            if not m.dedup:
                if len(set(targets)) != len(targets):
                    raise ModelError(DuplicateKey)
                for old, new, _ in updates:
                    if old != new and new in m.rows and new not in moved_away:
                        raise ModelError(DuplicateKey)
            else:
                # DEDUP KEY: a moved row replaces a row that holds its new key. The rules below
                # only draw moves whose targets are distinct, so the result is well defined.
                assert len(set(targets)) == len(targets)
            for old in moved_away:
                del m.rows[old]
            for _, new, new_row in updates:
                m.rows[new] = new_row
            return len(updates)

        self.change(sql, params, apply)

    @rule(delta=st.integers(-3, 3), p=small_int, use_where=st.booleans(), old=st.booleans())
    def update_pk_shift(self, delta: int, p: int, use_where: bool, old: bool) -> None:
        """UPDATE pk SET id = id + d [, v = id] [WHERE id >= p]: a shift, which may collide.

        `v = id` must see the id before the statement, not the moved one.
        """
        where = PREDICATES["pk"][1] if use_where else None
        old = old and ("v", "INT") in self.current["pk"].columns
        sql = "UPDATE pk SET id = id + ?" + (", v = id" if old else "")
        sql += " WHERE id >= ?" if use_where else ""
        params = (delta, p) if use_where else (delta,)

        def new_of(m: TableModel, row: tuple) -> tuple:
            new = list(row)
            new[m.position("id")] = row[m.position("id")] + delta
            if old:
                new[m.position("v")] = row[m.position("id")]
            return tuple(new)

        self.move("pk", sql, params, where, p, new_of)

    @rule(
        target_id=st.one_of(st.integers(-1, 13), st.none()),
        data=st.data(),
        p=small_int,
    )
    def update_pk_set(self, target_id: int | None, data: st.DataObject, p: int) -> None:
        """UPDATE pk SET id = k WHERE ...: one row moves (or several collide, or NULL)."""
        where = data.draw(st.sampled_from(PREDICATES["pk"]))
        sql = f"UPDATE pk SET id = ? WHERE {where[0]}"
        params = (target_id, p)

        def new_of(m: TableModel, row: tuple) -> tuple:
            new = list(row)
            new[m.position("id")] = target_id
            return tuple(new)

        self.move("pk", sql, params, where, p, new_of)

    @rule(hours=st.sampled_from([-24, -8, 8, 16, 24, 48]), p=small_int)
    def update_ts_shift(self, hours: int, p: int) -> None:
        """UPDATE ts SET time = time + d WHERE sym = s: every row of a symbol moves."""
        where = PREDICATES["ts"][0]
        sql = "UPDATE ts SET time = time + ? WHERE sym = ?"
        params = (hours * HOUR, SYMBOLS[p % 3])

        def new_of(m: TableModel, row: tuple) -> tuple:
            new = list(row)
            new[m.position("time")] = row[m.position("time")] + hours * HOUR
            return tuple(new)

        self.move("ts", sql, params, where, p, new_of)

    @rule(
        old_time=st.sampled_from(TIMES),
        old_sym=st.sampled_from(SYMBOLS),
        new_time=st.sampled_from(TIMES),
        new_sym=st.sampled_from(SYMBOLS),
    )
    def update_ts_single(self, old_time: int, old_sym: str, new_time: int, new_sym: str) -> None:
        """One row changes its whole key (and so its partition): onto a free or taken key."""
        sql = "UPDATE ts SET time = ?, sym = ? WHERE sym = ? AND time = ?"
        params = (iso(new_time), new_sym, old_sym, iso(old_time))
        where = (
            "",
            ("sym", "time"),
            lambda r, _p: r["sym"] == old_sym and r["time"] == old_time,
        )

        def new_of(m: TableModel, row: tuple) -> tuple:
            new = list(row)
            new[m.position("time")] = new_time
            new[m.position("sym")] = new_sym
            return tuple(new)

        self.move("ts", sql, params, where, 0, new_of)

    @rule(p=small_int, data=st.data())
    def insert_select(self, p: int, data: st.DataObject) -> None:
        """INSERT INTO nk (a, b) SELECT v, s FROM pk WHERE ...: reads what this transaction sees."""
        where = data.draw(st.sampled_from(PREDICATES["pk"]))
        sql = f"INSERT INTO nk (a, b) SELECT v, s FROM pk WHERE {where[0]}"

        def apply(tables: dict[str, TableModel]) -> int:
            source, target = tables["pk"], tables["nk"]
            for name, type_ in (("v", "INT"), ("s", "STRING")):
                if (name, type_) not in source.columns:
                    raise ModelError(UnknownColumn)
            a, b = target.position("a"), target.position("b")
            if target.columns[a][1] != "INT" or target.columns[b][1] != "STRING":
                raise ModelError(SqlError)
            picked = [row for _, row in sorted(self.matching(source, where, p))]
            v, s = source.position("v"), source.position("s")
            for row in picked:
                new = [None] * len(target.columns)
                new[a], new[b] = row[v], row[s]
                target.rows[target.next_rowid] = tuple(new)
                target.next_rowid += 1
            return len(picked)

        self.change(sql, (p,), apply)

    # -- DELETE, TRUNCATE ----------------------------------------------------------------

    @rule(table=tables_st, data=st.data(), p=small_int, use_where=st.booleans())
    def delete(self, table: str, data: st.DataObject, p: int, use_where: bool) -> None:
        where = data.draw(st.sampled_from(PREDICATES[table])) if use_where else None
        sql = f"DELETE FROM {table}"
        params: tuple = ()
        if where is not None:
            sql += f" WHERE {where[0]}"
            params = (predicate_param(table, where[0], p),) if "?" in where[0] else ()

        def apply(tables: dict[str, TableModel]) -> int:
            m = tables[table]
            matched = self.matching(m, where, p)
            for ident, _ in matched:
                del m.rows[ident]
            return len(matched)

        self.change(sql, params, apply)

    @rule(table=tables_st, data=st.data(), go=st.integers(0, 1))
    def truncate(self, table: str, data: st.DataObject, go: int) -> None:
        if go:
            return self.insert(table, data, 2, True)

        def apply(tables: dict[str, TableModel]) -> int:
            removed = len(tables[table].rows)
            tables[table].rows.clear()
            return removed

        self.change(f"TRUNCATE {table}", (), apply)

    # -- ALTER TABLE, DROP and CREATE ----------------------------------------------------

    @rule(table=tables_st, type_=st.sampled_from(ADDED_TYPES), choice=st.integers(0, 5))
    def add_column(self, table: str, type_: str, choice: int) -> None:
        model = self.current[table]
        dropped = [c for c in BASE_COLUMNS[table] if c[0] not in model.names()]
        if choice == 0:
            name = model.names()[-1]  # taken: an error
        elif dropped and choice < 4:
            name, type_ = dropped[0]  # a dropped column comes back, NULL in every row
        else:
            self.added += 1
            name = f"c{self.added}"

        def apply(tables: dict[str, TableModel]) -> None:
            m = tables[table]
            if name in m.names():
                raise ModelError(DuplicateColumn)
            m.columns.append((name, type_))
            for key, row in m.rows.items():
                m.rows[key] = (*row, None)

        self.change(f"ALTER TABLE {table} ADD COLUMN {name} {type_}", (), apply)

    @rule(table=tables_st, data=st.data(), go=st.integers(0, 2))
    def drop_column(self, table: str, data: st.DataObject, go: int) -> None:
        if go:
            return self.insert(table, data, 3, False)
        model = self.current[table]
        name = data.draw(st.sampled_from([*model.names(), "nope"]))

        def apply(tables: dict[str, TableModel]) -> None:
            m = tables[table]
            position = m.position(name)
            if name in PROTECTED[table] or len(m.columns) == 1:
                raise ModelError(SqlError)
            del m.columns[position]
            for key, row in m.rows.items():
                m.rows[key] = row[:position] + row[position + 1 :]

        self.change(f"ALTER TABLE {table} DROP COLUMN {name}", (), apply)

    @rule(table=tables_st, data=st.data(), go=st.integers(0, 3))
    def recreate(self, table: str, data: st.DataObject, go: int) -> None:
        """DROP TABLE and CREATE TABLE again (inside a transaction: in the same one)."""
        if go:
            return self.insert(table, data, 4, True)

        def apply(tables: dict[str, TableModel]) -> None:
            tables[table] = TableModel(table, list(BASE_COLUMNS[table]))

        sql = f"DROP TABLE {table}; {CREATE[table]}"
        if self.txn is None:
            # Outside a transaction the two statements commit one after the other.
            sql = f"BEGIN; {sql}; COMMIT"
        self.change(sql, (), apply)

    # -- durability ----------------------------------------------------------------------

    @precondition(lambda self: self.txn is None)
    @rule()
    def checkpoint(self) -> None:
        message = self.writer.execute("CHECKPOINT").message
        assert message is not None and message.startswith("checkpoint written at LSN ")

    @precondition(lambda self: self.txn is None)
    @rule(checkpoint_first=st.booleans())
    def reopen(self, checkpoint_first: bool) -> None:
        if checkpoint_first:
            self.writer.execute("CHECKPOINT")
        self.close()
        self.open()
        self.reopens += 1
        assert self.connection is not None
        assert self.connection.instance.recovery_messages == []

    # -- the check -----------------------------------------------------------------------

    @invariant()
    def tables_equal_model(self) -> None:
        if self.connection is None:
            return
        for name in CREATE:
            expected = self.committed[name]
            result = self.reader.execute(f"SELECT * FROM {name}")
            assert [c.name for c in result.columns or []] == expected.names(), name
            assert result.rows == expected.ordered(), f"committed {name}"
            if self.txn is not None:
                mine = self.txn[name]
                result = self.writer.execute(f"SELECT * FROM {name}")
                assert [c.name for c in result.columns or []] == mine.names(), name
                assert result.rows == mine.ordered(), f"in transaction {name}"


def _stored(value: Any, type_: str) -> Any:
    if value is None:
        return None
    if type_ == "DOUBLE":
        return float(value)
    return value


EngineModel.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestEngineModel = EngineModel.TestCase


class LongEngineModel(EngineModel):
    pass


LongEngineModel.TestCase.settings = settings(
    max_examples=1500,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.long
def test_engine_model_long() -> None:
    LongEngineModel.TestCase().runTest()
