"""A plain feed's page encoded a run at a time (`ChangeObjects.of_runs`) is exactly what the
change-at-a-time encoding writes, and both say what the spec says of each change (spec:
changes): its `lsn`, `seq`, `committed_at`, `op`, `key`, and `row` on the table's columns
as JSON values (timestamps as text), over a real engine's log with inserts, updates,
deletes, a column added and one dropped between the transactions. Likewise the rows of an
initial copy encoded as a block (`ChangeObjects.of_copied`, `CopiedRows.event_ids`) are the
objects and ids of its rows one by one (spec: changefeeds, initial).
"""

from __future__ import annotations

import tempfile
import threading
import time
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.features.change_stream import (
    CHUNK_ROWS,
    Change,
    ChangeBatch,
    RunPieces,
    read_runs,
)
from refimpl.engine.features.event_cursor import row_key
from refimpl.engine.features.feed_options import FeedFilter
from refimpl.engine.features.initial_copy import INITIAL, CopyPosition, read_initial
from refimpl.engine.query import deadlines
from refimpl.engine.storage import values
from refimpl.http.encode import encode_json
from refimpl.http.endpoints.change_encoding import (
    ChangeObjects,
    encode_json_answer,
    encode_sse,
)
from tests.http.change_pages import ROWS, big_table

VALUES = {
    "INT": st.integers(-(2**31), 2**31 - 1),
    "BIGINT": st.integers(-(2**63), 2**63 - 1),
    "DOUBLE": st.floats(allow_nan=False, allow_infinity=False),
    "STRING": st.text(max_size=8),
    "BOOLEAN": st.booleans(),
    "TIMESTAMP": st.integers(values.TIMESTAMP_MIN, values.TIMESTAMP_MAX),
}
TYPES = sorted(VALUES)


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[str], list[list[tuple[str, int, list[Any]]]]]:
    """Column types beside the key, and transactions of (op, id, values) on them."""
    types = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=4))
    cells = st.tuples(*(st.one_of(st.none(), VALUES[t]) for t in types)).map(list)
    step = st.tuples(st.sampled_from(["insert", "delete", "alter"]), st.integers(0, 5), cells)
    return types, draw(st.lists(st.lists(step, min_size=1, max_size=4), min_size=1, max_size=8))


def _write(
    conn: refimpl.Connection, types: list[str], transactions: list[list[tuple[str, int, list[Any]]]]
) -> None:
    """The transactions committed: an insert replaces the row of its key, if any; a
    transaction with an `alter` is followed by a column added and the first one dropped."""
    columns = ", ".join(f"c{i} {t}" for i, t in enumerate(types))
    conn.execute(f"CREATE TABLE t (id INT PRIMARY KEY, {columns})")
    session = conn.session()
    added = 0
    for transaction in transactions:
        names = session.execute("SELECT * FROM t LIMIT 0").columns
        assert names is not None  # a query's result has columns
        session.execute("BEGIN")
        for op, ident, cells in transaction:
            session.execute(f"DELETE FROM t WHERE id = {ident}")
            if op == "insert":
                row = [ident] + [
                    _fit(cells[i % len(cells)], c.type) for i, c in enumerate(names[1:])
                ]
                session.insert_rows("t", [c.name for c in names], [row])
        session.execute("COMMIT")
        if any(op == "alter" for op, _, _ in transaction):
            added += 1
            session.execute(f"ALTER TABLE t ADD COLUMN a{added} STRING")
            if len(names) > 2:
                session.execute(f"ALTER TABLE t DROP COLUMN {names[1].name}")
    session.close()


def _fit(value: Any, column_type: str) -> Any:
    if value is None:
        return None
    if column_type == "STRING":
        return value if isinstance(value, str) else str(value)
    if column_type == "BOOLEAN":
        return value if isinstance(value, bool) else None
    if column_type == "DOUBLE":
        return float(value) if isinstance(value, float) else None
    if column_type == "TIMESTAMP":
        fits = isinstance(value, int) and not isinstance(value, bool)
        return value if fits and values.TIMESTAMP_MIN <= value <= values.TIMESTAMP_MAX else None
    if column_type in ("INT", "BIGINT"):
        fits = isinstance(value, int) and not isinstance(value, bool)
        return value if fits and -(2**31) <= value < 2**31 else None
    return None


def _expected(change: Change, names: tuple[str, ...], kinds: dict[str, str]) -> dict[str, Any]:
    """A change's object as the spec describes it, value by value."""
    row = None
    if change.op == "upsert":
        row = {
            name: values.to_json(value, kinds[name])
            for name, value in zip(names, change.row, strict=True)
        }
    assert change.committed_at is not None
    return {
        "lsn": change.lsn,
        "seq": change.seq,
        "committed_at": values.format_timestamp(change.committed_at),
        "op": change.op,
        "key": change.key,
        "row": row,
    }


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), page=st.integers(1, 12))
def test_runs_encode_as_the_changes_do(
    history: tuple[list[str], list[list[Any]]], page: int
) -> None:
    types, transactions = history
    with tempfile.TemporaryDirectory() as folder, refimpl.connect(folder) as conn:
        _write(conn, types, transactions)
        database = conn.instance.database(conn.database)
        schema = database.tables["t"].schema
        names = schema.column_names
        kinds = {c.name: c.type for c in schema.columns}
        position = 0
        while True:
            runs = read_runs(database, "t", schema, position, page)
            changes = ChangeBatch(runs.changes(), runs.next_lsn, runs.more)
            json_runs = encode_json_answer("t", runs, names, kinds, 7, 1)
            assert json_runs == encode_json_answer("t", changes, names, kinds, 7, 1)
            sse_runs = encode_sse(runs, names, kinds)
            assert sse_runs == encode_sse(changes, names, kinds)
            decoded = msgspec.json.decode(json_runs)["changes"]
            expected = [_expected(c, names, kinds) for c in changes.changes]
            assert decoded == expected
            # An SSE `id` ends each transaction: the LSN of its last change.
            ids = [
                int(line[4:]) for line in sse_runs.decode().split("\n") if line.startswith("id: ")
            ]
            lsns = [c.lsn for c in changes.changes]
            ends = [lsn for i, lsn in enumerate(lsns) if i + 1 == len(lsns) or lsns[i + 1] != lsn]
            assert ids == [*ends, runs.next_lsn]
            # The same page read as it is encoded, a piece at a time: the same answers.
            pieces = RunPieces(database, "t", schema, position, page)
            assert encode_json_answer("t", pieces, names, kinds, 7, 1) == json_runs
            assert (pieces.next_lsn, pieces.more, pieces.rows) == (
                runs.next_lsn,
                runs.more,
                len(changes.changes),
            )
            assert encode_sse(RunPieces(database, "t", schema, position, page), names, kinds) == (
                sse_runs
            )
            if not runs.runs:
                break
            position = runs.next_lsn


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=histories(),
    page=st.integers(1, 12),
    full=st.booleans(),
    typed=st.booleans(),
    filtered=st.booleans(),
)
def test_copied_rows_encode_as_their_changes_do(
    history: tuple[list[str], list[list[Any]]], page: int, full: bool, typed: bool, filtered: bool
) -> None:
    types, transactions = history
    with tempfile.TemporaryDirectory() as folder, refimpl.connect(folder) as conn:
        _write(conn, types, transactions)
        if full:
            conn.execute("ALTER TABLE t REPLICA IDENTITY FULL")
        database = conn.instance.database(conn.database)
        schema = database.tables["t"].schema
        objects = ChangeObjects(schema.column_names, {c.name: c.type for c in schema.columns})
        feed_filter = FeedFilter.compile(schema, "id % 2 = 0") if filtered else None
        at = None
        while True:
            batch = read_initial(database, schema, at, page, feed_filter)
            copied = batch.copied
            assert copied is not None
            items = batch.items[len(batch.changes) :]
            one_by_one = [
                objects.with_options(item.change, full, INITIAL if typed else None)
                for item in items
            ]
            assert encode_json(objects.of_copied(copied, typed)) == encode_json(one_by_one)
            ids = [
                p.event_id() if isinstance(p, CopyPosition) else str(p)
                for p in (item.position for item in items)
            ]
            assert copied.event_ids() == ids
            assert copied.keys == [row_key(schema, row, (row[0],)) for row in copied.rows]
            if not batch.copying:
                break
            assert isinstance(batch.position, CopyPosition)
            at = batch.position


def test_pages_past_a_chunk_encode_whole() -> None:
    """A transaction and a copy page of more rows than one C-level step takes
    (CHUNK_ROWS): the objects made a chunk at a time are every row's, in order."""
    rows = ROWS
    with big_table("t") as (database, schema, names, kinds):
        runs = read_runs(database, "t", schema, 0, rows + 1)  # the CREATE, then the rows
        changes = ChangeBatch(runs.changes(), runs.next_lsn, runs.more)
        assert encode_json_answer("t", runs, names, kinds, 1, 1) == encode_json_answer(
            "t", changes, names, kinds, 1, 1
        )
        assert encode_sse(runs, names, kinds) == encode_sse(changes, names, kinds)
        decoded = msgspec.json.decode(encode_json_answer("t", runs, names, kinds, 1, 1))
        upserts = [c for c in decoded["changes"] if c["op"] == "upsert"]
        assert [c["seq"] for c in upserts] == list(range(rows))
        assert upserts[-1]["row"]["s"] == f"row\n{rows - 1}"
        batch = read_initial(database, schema, None, rows, None)
        assert batch.copied is not None
        objects = ChangeObjects(names, kinds)
        one_by_one = [objects.with_options(item.change, False, None) for item in batch.items]
        assert encode_json(objects.of_copied(batch.copied, False)) == encode_json(one_by_one)
        assert len(set(batch.copied.event_ids())) == rows


def test_small_pages_one_after_another_never_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader of small pages is answered page after page by the same worker: a page of
    one step (CHUNK_ROWS objects or fewer) never lets the interpreter lock go, however long
    the worker has been answering such pages; a page of several steps does, between them."""
    pauses: list[float] = []
    real_sleep = time.sleep

    def recorded(seconds: float) -> None:
        pauses.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(deadlines.time, "sleep", recorded)
    with tempfile.TemporaryDirectory() as folder, refimpl.connect(folder) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
        session = conn.session()
        for first in range(0, 3 * CHUNK_ROWS, 100):
            session.insert_rows("t", ["id", "s"], [(i, f"r{i}") for i in range(first, first + 100)])
        database = conn.instance.database(conn.database)
        schema = database.tables["t"].schema
        names, kinds = schema.column_names, {c.name: c.type for c in schema.columns}
        small = read_runs(database, "t", schema, 1, 100)
        large = read_runs(database, "t", schema, 1, 3 * CHUNK_ROWS)

        def answer_pages(batch: Any, seconds: float) -> None:
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                encode_json_answer("t", batch, names, kinds, 1, 1)
                encode_sse(batch, names, kinds)

        # A thread of its own: its first step starts its turn, whatever other tests did.
        worker = threading.Thread(target=answer_pages, args=(small, 4 * deadlines.TURN_SECONDS))
        worker.start()
        worker.join(30)
        assert pauses == []
        worker = threading.Thread(target=answer_pages, args=(large, 4 * deadlines.TURN_SECONDS))
        worker.start()
        worker.join(30)
        assert pauses, "pages of several steps never let the lock go"
