"""A long INSERT ... VALUES of constants loads as an import does (`values_load`): prepared
before the write lock, installed as one commit. Whatever the columns it names, their order,
the parameters and NULLs, the table holds what the ordinary insert would have made; one the
load cannot take (a key twice or already held, an index, a value that does not convert, a
NULL key, RETURNING, an open transaction, a value that is not a constant) goes the ordinary
way and answers as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.engine.instance import Instance
from refimpl.engine.session import Session
from refimpl.engine.statements.values_load import BULK_VALUES_ROWS
from refimpl.engine.storage import values
from refimpl.errors import DuplicateKey, InvalidValue, NotNullViolation

COUNT = BULK_VALUES_ROWS + 200
CREATE = "CREATE TABLE {} (id BIGINT PRIMARY KEY, at TIMESTAMP, x DOUBLE, s STRING)"


@pytest.fixture
def with_t(session: Session) -> Session:
    """The engine tests' session, its database holding an empty table t."""
    session.execute(CREATE.format("t"))
    return session


def _loads(session: Session) -> list[int | None]:
    """What each of the database's bulk loads answers from now on (a spy around it)."""
    database = session.database
    answers: list[int | None] = []
    load = database.load_rows

    def spied(name: str, rows: values.TypedRows) -> tuple[int, int] | None:
        loaded = load(name, rows)
        answers.append(None if loaded is None else loaded[0])
        return loaded

    database.load_rows = spied  # type: ignore[method-assign]
    return answers


def _values(rows: list[tuple]) -> str:
    def literal(value: object) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return repr(value)

    return ", ".join("(" + ", ".join(map(literal, row)) + ")" for row in rows)


ROWS: list[tuple[Any, ...]] = [
    (n, n * 1_000_000, None if n % 10 == 0 else n / 4, f"row '{n}'") for n in range(COUNT)
]


def test_a_long_values_list_is_one_load_that_survives_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    instance = Instance.open(data)
    session = instance.session()
    session.execute(CREATE.format("t"))
    before = session.database.applied_lsn
    loads = _loads(session)
    answer = session.execute(f"INSERT INTO t VALUES {_values(ROWS)}")
    assert answer.count == COUNT
    assert loads == [COUNT]  # it went the load's way
    assert session.database.applied_lsn == before + 1
    session.close()
    instance.close()
    reopened = Instance.open(data)
    try:
        again = reopened.session()
        assert again.execute("SELECT count(*) FROM t").rows == [(COUNT,)]
        assert again.execute("SELECT * FROM t WHERE id = 1021").rows == [ROWS[1021]]
        assert again.execute("SELECT count(*) FROM t WHERE x IS NULL").rows == [(COUNT // 10,)]
        again.close()
    finally:
        reopened.close()


def test_what_the_load_cannot_take_answers_as_the_ordinary_insert(with_t: Session) -> None:
    session = with_t
    twice = ROWS[:COUNT] + [ROWS[3]]
    with pytest.raises(DuplicateKey, match="duplicate primary key 3"):
        session.execute(f"INSERT INTO t VALUES {_values(twice)}")
    bad: list[tuple[Any, ...]] = [*ROWS[:COUNT]]
    bad[700] = (700, "not a time", 1.0, "x")
    with pytest.raises(InvalidValue, match="'not a time' is not a timestamp"):
        session.execute(f"INSERT INTO t VALUES {_values(bad)}")
    no_key: list[tuple[Any, ...]] = [*ROWS[:COUNT]]
    no_key[5] = (None, 0, 1.0, "x")
    with pytest.raises(NotNullViolation):
        session.execute(f"INSERT INTO t VALUES {_values(no_key)}")
    assert session.execute("SELECT count(*) FROM t").rows == [(0,)]
    session.execute(f"INSERT INTO t VALUES {_values(ROWS[:COUNT])}")
    again = [(n + COUNT - 1, *rest) for n, *rest in ROWS[:COUNT]]
    with pytest.raises(DuplicateKey, match=f"duplicate primary key {COUNT - 1}"):
        session.execute(f"INSERT INTO t VALUES {_values(again)}")
    assert session.execute("SELECT count(*) FROM t").rows == [(COUNT,)]
    session.execute("CREATE INDEX t_s ON t (s)")
    more = [(n + 10 * COUNT, *rest) for n, *rest in ROWS[:COUNT]]
    loads = _loads(session)
    session.execute(f"INSERT INTO t VALUES {_values(more)}")
    assert loads == []  # an indexed table takes no load: its rows were not converted twice
    assert session.execute("SELECT id FROM t WHERE s = 'row ''15'''").rows == [
        (15,),
        (15 + 10 * COUNT,),
    ]


def test_returning_a_transaction_and_expressions_take_the_ordinary_way(with_t: Session) -> None:
    session = with_t
    rows = ROWS[:COUNT]
    answer = session.execute(f"INSERT INTO t VALUES {_values(rows)} RETURNING id")
    assert len(answer.rows) == COUNT
    session.execute("BEGIN")
    shifted = [(n + COUNT, *rest) for n, *rest in rows]
    session.execute(f"INSERT INTO t VALUES {_values(shifted)}")
    session.execute("ROLLBACK")
    assert session.execute("SELECT count(*) FROM t").rows == [(COUNT,)]
    computed = ", ".join(f"({n + 2 * COUNT} + 1, now(), 1.5, 'c')" for n in range(COUNT))
    session.execute(f"INSERT INTO t VALUES {computed}")
    assert session.execute("SELECT count(*) FROM t WHERE s = 'c'").rows == [(COUNT,)]


COLUMN_SETS = [
    ("id", "at", "x", "s"),
    ("s", "id"),
    ("x", "id", "at"),
    ("id",),
]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    columns=st.sampled_from(COLUMN_SETS),
    named=st.booleans(),
    params=st.booleans(),
    seed=st.integers(0, 1_000),
)
def test_a_load_makes_what_the_ordinary_insert_makes(
    session: Session, columns: tuple[str, ...], named: bool, params: bool, seed: int
) -> None:
    """The same VALUES into a fresh table once as a load and once in a transaction (the
    ordinary way): the two tables hold the same rows."""
    if not named:
        columns = ("id", "at", "x", "s")
    for table in ("loaded", "ordinary"):
        session.execute(f"DROP TABLE IF EXISTS {table}")
        session.execute(CREATE.format(table))
    full: dict[str, list[Any]] = {
        "id": [seed * COUNT + n for n in range(COUNT)],
        "at": [None if n % 7 == 0 else n * 1_000 + seed for n in range(COUNT)],
        "x": [None if n % 5 == 0 else (n - seed) / 3 for n in range(COUNT)],
        "s": [None if n % 3 == 0 else f"{seed}-{n}" for n in range(COUNT)],
    }
    rows = [tuple(full[c][n] for c in columns) for n in range(COUNT)]
    listed = f"({', '.join(columns)})" if named else ""
    loads = _loads(session)
    for table in ("loaded", "ordinary"):
        if table == "ordinary":
            session.execute("BEGIN")
        if params:
            marks = ", ".join(["(" + ", ".join("?" * len(columns)) + ")"] * COUNT)
            flat = [value for row in rows for value in row]
            session.execute(f"INSERT INTO {table} {listed} VALUES {marks}", flat)
        else:
            session.execute(f"INSERT INTO {table} {listed} VALUES {_values(rows)}")
        if table == "ordinary":
            session.execute("COMMIT")
    assert loads == [COUNT]  # the first went the load's way, the second did not try
    loaded = session.execute("SELECT * FROM loaded ORDER BY id").rows
    assert loaded == session.execute("SELECT * FROM ordinary ORDER BY id").rows
    assert len(loaded) == COUNT
