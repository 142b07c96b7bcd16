"""A one-row INSERT's own handler (`PreparedInsert`, what `Session.prepare`, `run_prepared`
and `execute` of a shared parse run) answers and writes exactly what the general INSERT
(`executor`'s) does: the same rows, errors, triggers, DEDUP, indexes and rights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session
from refimpl.engine.statements import executor
from refimpl.engine.statements.prepared_insert import PreparedInsert
from refimpl.engine.statements.prepared_runs import prepared_handler
from refimpl.errors import Forbidden, KdbError
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached

SETUP = [
    "CREATE TABLE t (id BIGINT NOT NULL, v DOUBLE, s STRING, PRIMARY KEY (id))",
    "CREATE TABLE r (a INT, b STRING UNIQUE)",  # row ids, a UNIQUE column
    "CREATE TABLE c (time TIMESTAMP, symbol SYMBOL, close DOUBLE) TIMESERIES(time)"
    " PARTITION BY YEAR, SYMBOL(symbol) SORT BY (symbol, time) DEDUP KEY (symbol, time)",
    "CREATE TABLE mirror (id BIGINT PRIMARY KEY, v DOUBLE)",
    "CREATE TABLE g (id BIGINT PRIMARY KEY, v DOUBLE)",
    "CREATE TRIGGER m_ins AFTER INSERT ON g BEGIN INSERT INTO mirror VALUES (NEW.id, NEW.v); END",
    "INSERT INTO t VALUES (1, 0.5, 'a')",
    # A key of two columns, neither next to the other nor in the table's order.
    "CREATE TABLE k (a INT NOT NULL, x STRING, b SYMBOL, PRIMARY KEY (b, a))",
]

# Each case: statements run one after the other, each with its parameters.
CASES: list[list[tuple[str, tuple[Any, ...]]]] = [
    [("INSERT INTO t VALUES (?, ?, ?)", (2, 1.5, "b"))],
    [("INSERT INTO t VALUES (?, ?, ?)", (1, 1.5, "dup"))],  # the key is taken
    [("INSERT INTO t VALUES (?, ?, ?)", (None, 1.0, "x"))],  # NOT NULL
    [("INSERT INTO t VALUES (?, ?, ?)", ("4", "2.5", 7))],  # converted by the column types
    [("INSERT INTO t VALUES (?, ?, ?)", ("four", 1.0, "x"))],  # not a BIGINT
    # Values kept as they are when of their column's type and range, else converted or refused
    [("INSERT INTO t VALUES (?, ?, ?)", (2**63, 1.0, "x"))],  # past BIGINT
    [("INSERT INTO t VALUES (?, ?, ?)", (-(2**63), -1.5e308, ""))],  # the edges
    [("INSERT INTO t VALUES (?, ?, ?)", (True, 1.0, "x"))],  # a boolean is no BIGINT
    [("INSERT INTO t VALUES (?, ?, ?)", (3, float("inf"), "x"))],
    [("INSERT INTO t VALUES (?, ?, ?)", (3, float("nan"), "x"))],
    [("INSERT INTO t VALUES (?, ?, ?)", (3, 10**400, "x"))],  # an integer too large for DOUBLE
    [("INSERT INTO t VALUES (?, ?, ?)", (3, 7, "x"))],  # an integer into DOUBLE: 7.0
    [("INSERT INTO r VALUES (?, ?)", (2**31, "x"))],  # past INT
    [("INSERT INTO r VALUES (?, ?)", (-(2**31), "x"))],
    [("INSERT INTO t (s, id, v) VALUES (?, ?, ?)", ("z", 5, 0.25))],  # reordered
    [("INSERT INTO t (id, v) VALUES (?, 9.5)", (6,))],  # a literal, a column left NULL
    [("INSERT INTO t (id, id) VALUES (?, ?)", (7, 7))],  # a column twice
    [("INSERT INTO t (id, nope) VALUES (?, ?)", (7, 7))],  # no such column
    [("INSERT INTO t (id, v) VALUES (?, ?)", (7,))],  # a parameter missing
    [("INSERT INTO t VALUES (?, ?)", (8, 1.0))],  # too few values for the columns
    [("INSERT INTO t VALUES (?, ?, ?)", (13, 1.0, "x", "more"))],  # a parameter left over
    [("INSERT INTO t VALUES (?, ?, ?)", (14, 1.0, None))],  # NULL where a value may be
    [("INSERT INTO nowhere VALUES (?)", (1,))],
    [
        ("INSERT INTO k VALUES (?, ?, ?)", (1, "x", "S")),
        ("INSERT INTO k VALUES (?, ?, ?)", (1, "y", "S")),
    ],
    [
        ("INSERT INTO k VALUES (?, ?, ?)", (1, "x", "S")),
        ("INSERT INTO k VALUES (?, ?, ?)", (2, "y", "S")),
    ],
    [("INSERT INTO k VALUES (?, ?, ?)", (None, "x", "S"))],  # NULL in a key column
    [("INSERT INTO k VALUES (?, ?, ?)", (1, "x", None))],  # the other
    [("INSERT INTO k (a, b) VALUES (?, ?)", (3, "T"))],
    [("INSERT INTO r VALUES (?, ?)", (1, "u")), ("INSERT INTO r VALUES (?, ?)", (2, "u"))],
    [("INSERT INTO r (b) VALUES (?)", ("only",)), ("INSERT INTO r (b) VALUES (?)", ("two",))],
    [
        ("INSERT INTO c VALUES (?, ?, ?)", ("2026-09-24T10:00:00Z", "NABIL", 1510.0)),
        ("INSERT INTO c VALUES (?, ?, ?)", ("2026-09-24T10:00:00Z", "NABIL", 1520.0)),
    ],
    [("INSERT INTO g VALUES (?, ?)", (1, 2.0)), ("INSERT INTO g VALUES (?, ?)", (2, 3.0))],
    [
        ("INSERT INTO t VALUES (?, ?, ?)", (10, 1.0, "x")),
        ("ALTER TABLE t ADD COLUMN n INT", ()),
        ("INSERT INTO t VALUES (?, ?, ?)", (11, 1.0, "y")),  # too few values now
        ("INSERT INTO t VALUES (?, ?, ?, ?)", (12, 1.0, "y", 4)),
    ],
]


def outcome(run: Any) -> object:
    try:
        result = run()
    except KdbError as error:
        return type(error).__name__, error.message
    return result.message, result.count


def tables(session: Session) -> dict[str, list[tuple]]:
    names = ["t", "r", "c", "mirror", "g", "k"]
    return {n: sorted(session.execute(f"SELECT * FROM {n}").rows, key=repr) for n in names}


def run_case(session: Session, case: list[tuple[str, tuple]], fast: bool) -> list[object]:
    """Each statement of `case` by its one-row handler (`fast`) or the general INSERT's."""
    answers = []
    for text, params in case:
        statement = parse_cached(text).statements[0]
        if not isinstance(statement, ast.Insert):
            answers.append(outcome(lambda text=text: session.execute(text)))
            continue
        handler = prepared_handler(statement) if fast else executor.handler_of(statement)
        assert isinstance(handler, PreparedInsert) == fast
        answers.append(
            outcome(lambda h=handler, s=statement, t=text, p=params: h(session, s, t, p))
        )
    return answers


def fresh(path: Path) -> tuple[Instance, Session]:
    instance = Instance.open(path)
    session = instance.session()
    for text in SETUP:
        session.execute(text)
    return instance, session


@pytest.mark.parametrize("case", CASES, ids=[c[0][0] + repr(c[0][1]) for c in CASES])
def test_writes_and_answers_as_the_general_insert(
    tmp_path: Path, case: list[tuple[str, tuple]]
) -> None:
    seen: list[tuple[object, ...]] = []
    for fast in (True, False):
        instance, session = fresh(tmp_path / str(fast))
        try:
            answers = run_case(session, case, fast)
            seen.append((answers, tables(session)))
            session.execute("BEGIN")  # in a transaction too, rolled back
            more = run_case(session, [(text, p) for text, p in case if "ALTER" not in text], fast)
            session.execute("ROLLBACK")
            seen[-1] += (more, tables(session))
        finally:
            instance.close()
    assert seen[0] == seen[1]


def test_the_rows_survive_a_reopen(tmp_path: Path) -> None:
    instance, session = fresh(tmp_path / "data")
    insert = session.prepare("INSERT INTO t (s, id, v) VALUES (?, ?, ?)")
    assert insert is not None
    for n in range(2, 6):
        session.run_prepared(insert, (f"row {n}", n, n * 0.5))
    before = tables(session)
    instance.close()
    instance = Instance.open(tmp_path / "data")
    try:
        assert tables(instance.session()) == before
        assert before["t"][-1] == (5, 2.5, "row 5")
    finally:
        instance.close()


def test_rights_are_checked_at_every_run(instance: Instance) -> None:
    admin = instance.session()
    admin.execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")
    admin.execute("CREATE USER bob")
    admin.execute("GRANT WRITE ON DATABASE demo TO bob")
    bob = instance.session(principal=Principal("bob", False))
    insert = bob.prepare("INSERT INTO t VALUES (?)")
    assert insert is not None and isinstance(insert.handler, PreparedInsert)
    bob.run_prepared(insert, (1,))
    admin.execute("REVOKE WRITE ON DATABASE demo FROM bob")
    with pytest.raises(Forbidden):
        bob.run_prepared(insert, (2,))
    assert admin.execute("SELECT id FROM t").rows == [(1,)]


def test_a_trigger_made_after_the_prepare_fires(instance: Instance) -> None:
    admin = instance.session()
    admin.execute("CREATE TABLE g (id BIGINT PRIMARY KEY, v DOUBLE)")
    admin.execute("CREATE TABLE mirror (id BIGINT PRIMARY KEY, v DOUBLE)")
    insert = admin.prepare("INSERT INTO g VALUES (?, ?)")
    assert insert is not None
    admin.run_prepared(insert, (1, 1.0))
    admin.execute(
        "CREATE TRIGGER m AFTER INSERT ON g BEGIN INSERT INTO mirror VALUES (NEW.id, NEW.v); END"
    )
    admin.run_prepared(insert, (2, 2.0))
    assert admin.execute("SELECT * FROM mirror").rows == [(2, 2.0)]


def test_which_inserts_have_their_own_handler() -> None:
    def handler(text: str) -> object:
        return prepared_handler(parse_cached(text).statements[0])

    assert isinstance(handler("INSERT INTO t VALUES (?, 1, 'x')"), PreparedInsert)
    assert not isinstance(handler("INSERT INTO t VALUES (?), (?)"), PreparedInsert)
    assert not isinstance(handler("INSERT INTO t VALUES (? + 1)"), PreparedInsert)
    assert not isinstance(handler("INSERT INTO t VALUES (?) RETURNING id"), PreparedInsert)
    assert not isinstance(handler("INSERT INTO t SELECT * FROM u"), PreparedInsert)
