"""`prepare_select` takes a SELECT's rows under the state lock and `finish` reads, filters and
orders them after it is let go: the answer is `run_select`'s, of the state taken, and a
commit completes while the ORDER BY runs."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import refimpl
from refimpl.engine.query.prepared_select import PreparedSelect, prepare_select
from refimpl.engine.query.select import run_select
from refimpl.engine.statements.queries import CommittedTable
from refimpl.engine.storage.access_hints import AccessHints
from refimpl.errors import KdbError
from refimpl.sql.parser import parse

# Each query, and whether its rows are ordered after the lock (else it runs whole at once).
QUERIES = [
    ("SELECT id, g, v FROM t ORDER BY v DESC, id LIMIT 7", True),
    ("SELECT g, count(*), sum(v) FROM t WHERE id % 2 = 0 GROUP BY g ORDER BY g", True),
    ("SELECT id FROM t ORDER BY g, id DESC LIMIT 3 OFFSET 2", True),
    ("SELECT g, max(v) FROM t GROUP BY g", True),
    ("SELECT id FROM t ORDER BY id LIMIT 0", True),
    ("SELECT id FROM t WHERE v > 3 LIMIT 4", True),  # its LIMIT stops the read early
    ("SELECT id, v FROM t WHERE v > 3", True),  # its WHERE filters after the lock
    ("SELECT id, now() IS NULL FROM t ORDER BY id LIMIT 5", False),  # now(): the run's moment
]


def _select(text: str) -> Any:
    return parse(text).statements[0]


@pytest.fixture()
def conn() -> Iterator[refimpl.Connection]:
    with tempfile.TemporaryDirectory() as folder:
        connection = refimpl.connect(Path(folder))
        connection.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, g STRING, v INT)")
        values = ", ".join(f"({i}, 'g{i % 5}', {i * 7919 % 13})" for i in range(400))
        connection.execute("INSERT INTO t VALUES " + values)
        yield connection


@pytest.mark.parametrize(("text", "split"), QUERIES)
def test_the_answer_is_run_selects(conn: refimpl.Connection, text: str, split: bool) -> None:
    database = conn.instance.database(conn.database)
    with database.state_lock:
        source = CommittedTable(database.committed_table("t"), None)
        expected = run_select(_select(text), source, (), 0)
        prepared = prepare_select(_select(text), source, (), 0, plans=database.plan_cache)
    assert (prepared.output is None) == split
    assert prepared.finish() == expected
    assert prepared.finish() == expected  # again: the first answer


def test_limit_0_reads_no_row(conn: refimpl.Connection) -> None:
    """LIMIT 0 computes nothing, so no row's error surfaces (a cast of a text that is no
    number would fail on every row)."""
    database = conn.instance.database(conn.database)
    select = _select("SELECT id FROM t WHERE CAST(g AS INT) > 0 ORDER BY id LIMIT 0")
    with database.state_lock:
        source = CommittedTable(database.committed_table("t"), None)
        prepared = prepare_select(select, source, (), 0)
    assert prepared.rows == []
    assert prepared.finish().rows == []


def test_a_where_is_evaluated_after_the_lock_with_its_errors() -> None:
    """A SELECT's WHERE filters the rows after the state lock is let go: its errors are the
    answer's, raised by `finish`, as a run raises them."""
    with tempfile.TemporaryDirectory() as folder:
        connection = refimpl.connect(Path(folder))
        connection.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, g STRING)")
        connection.execute("INSERT INTO t VALUES (1, 'one')")
        database = connection.instance.database(connection.database)
        select = _select("SELECT id FROM t WHERE CAST(g AS INT) > 0")
        with database.state_lock:
            source = CommittedTable(database.committed_table("t"), None)
            prepared = prepare_select(select, source, (), 0)
            with pytest.raises(KdbError) as ran:
                run_select(select, source, (), 0)
        assert prepared.output is None
        with pytest.raises(type(ran.value), match=str(ran.value)[:20]):
            prepared.finish()


class _Held:
    """A value whose first comparison waits for `go`: an ORDER BY over it runs until the
    test lets it go."""

    def __init__(self, value: int, started: threading.Event, go: threading.Event) -> None:
        self.value = value
        self.started = started
        self.go = go

    def __lt__(self, other: _Held) -> bool:
        self.started.set()
        assert self.go.wait(60), "the test never let the ORDER BY go on"
        return self.value < other.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Held) and self.value == other.value

    __hash__ = None  # type: ignore[assignment]


class _HeldTable:
    """The committed table as a source whose column v holds `_Held` values."""

    def __init__(self, inner: CommittedTable, started: threading.Event, go: threading.Event):
        self.inner = inner
        self.columns = inner.columns
        self.qualifier = inner.qualifier
        self.schema = inner.schema
        self.started = started
        self.go = go

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]:
        for row in self.inner.rows(hints):
            yield (row[0], row[1], _Held(row[2], self.started, self.go))


def test_a_commit_completes_while_the_order_by_runs(conn: refimpl.Connection) -> None:
    database = conn.instance.database(conn.database)
    started, go = threading.Event(), threading.Event()
    select = _select("SELECT id, v FROM t ORDER BY v, id")
    with database.state_lock:
        source = _HeldTable(CommittedTable(database.committed_table("t"), None), started, go)
        prepared = prepare_select(select, source, (), 0)
    answers: list[Any] = []
    finisher = threading.Thread(target=lambda: answers.append(prepared.finish()), daemon=True)
    finisher.start()
    assert started.wait(30), "the ORDER BY never began"
    # The ORDER BY is stopped in the middle of its sort; a writer commits meanwhile.
    writer = threading.Thread(
        target=lambda: conn.execute("INSERT INTO t VALUES (1000, 'new', -1)"), daemon=True
    )
    writer.start()
    writer.join(30)
    committed = not writer.is_alive()
    go.set()
    finisher.join(60)
    assert committed, "the commit waited for the ORDER BY"
    assert conn.execute("SELECT count(*) FROM t").rows == [(401,)]
    # The answer is of the state read before the commit: 400 rows, without id 1000.
    (output,) = answers
    assert len(output.rows) == 400
    assert 1000 not in {row[0] for row in output.rows}
    values = [row[1].value for row in output.rows]
    assert values == sorted(values)


def _lock_held_while_finishing(
    database: Any, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[bool, bool]]:
    """Spies on `PreparedSelect.finish` (the real one still runs): one (split, held) pair per
    call, `held` whether the calling thread held `database`'s state lock then."""
    seen: list[tuple[bool, bool]] = []
    real = PreparedSelect.finish

    def spy(self: PreparedSelect) -> Any:
        seen.append((self.output is None, getattr(database.state_lock._depth, "value", 0) > 0))
        return real(self)

    monkeypatch.setattr(PreparedSelect, "finish", spy)
    return seen


def test_a_statement_orders_after_letting_the_lock_go(
    conn: refimpl.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor's one-table SELECT (and so the result cache's answer) sorts and groups
    with the state lock let go, and answers as before."""
    database = conn.instance.database(conn.database)
    seen = _lock_held_while_finishing(database, monkeypatch)
    ordered = conn.execute("SELECT id, v FROM t ORDER BY v DESC, id LIMIT 3").rows
    grouped = conn.execute("SELECT g, count(*) FROM t GROUP BY g ORDER BY g").rows
    assert seen == [(True, False), (True, False)]
    assert ordered == [(6, 12), (19, 12), (32, 12)]
    assert grouped == [(f"g{i}", 80) for i in range(5)]
    # Asked again, the result cache answers the same rows.
    assert conn.execute("SELECT id, v FROM t ORDER BY v DESC, id LIMIT 3").rows == ordered
