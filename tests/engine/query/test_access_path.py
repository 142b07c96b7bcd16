"""A range on the column a table's rows are ordered by first bounds the read (EXPLAIN's
`(range of c)`), and the answer stays the whole WHERE's: for keys of one and two columns,
a SORT BY column, a time-ordered partitioned table, and tables spanning many blocks with
rows deleted, every range (bounds on either side, open, empty, reversed) gives exactly
the rows a filter over every row gives."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refimpl

DAY = 86_400_000_000
START = 1_767_312_000_000_000  # 2026-01-02T00:00:00Z
OPS = ["=", "<", "<=", ">", ">="]
FLIPPED = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
# Tables whose rows are ordered by column `a` first (a key column, a SORT BY column of the
# key, a TIMESERIES column), and one that is not (its order starts with a column that may
# be NULL): each holds rows (a, b).
TABLES = {
    "key1": "CREATE TABLE key1 (a INT PRIMARY KEY, b INT)",
    "key2": "CREATE TABLE key2 (a BIGINT, b INT, PRIMARY KEY (a, b))",
    "sorted": "CREATE TABLE sorted (id INT, a INT, b INT, PRIMARY KEY (id, a)) SORT BY (a)",
    "nullable": "CREATE TABLE nullable (id INT PRIMARY KEY, a INT, b INT) SORT BY (a)",
    "times": "CREATE TABLE times (a TIMESTAMP, b INT) TIMESERIES(a) PARTITION BY DAY",
}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[refimpl.Connection]:
    connection = refimpl.connect(tmp_path_factory.mktemp("ranges") / "data")
    for create in TABLES.values():
        connection.execute(create)
    yield connection
    connection.close()


def _value(table: str, a: int) -> str:
    """The SQL literal of `a` in `table`'s column a (a time: `a` times eight hours, and
    seven microseconds, from 2026-01-02)."""
    if table == "times":
        micros = _model_value(table, a)
        moment = datetime.fromtimestamp(micros / 1e6, UTC)
        return f"'{moment:%Y-%m-%dT%H:%M:%S}.{micros % 1_000_000:06d}Z'"
    return str(a)


def _model_value(table: str, a: int) -> int:
    """`a` as stored (a time in microseconds)."""
    if table == "times":
        return START + a * DAY // 3 + 7
    return a


def _load(db: refimpl.Connection, table: str, rows: list[tuple[int | None, int]]) -> list[tuple]:
    """Replace the rows of `table`; the rows as stored, (a, b)."""
    stored: dict[object, tuple] = {}
    statements = ["BEGIN", f"DELETE FROM {table}"]
    if table == "key1":
        rows = list({a: (a, b) for a, b in rows}.values())
    elif table == "key2":
        rows = list(dict.fromkeys(rows))
    for number, (a, b) in enumerate(rows):
        literal = "NULL" if a is None else _value(table, a)
        if table in ("sorted", "nullable"):
            statements.append(f"INSERT INTO {table} VALUES ({number}, {literal}, {b})")
            stored[number] = (None if a is None else _model_value(table, a), b)
        elif table == "times":
            statements.append(f"INSERT INTO {table} VALUES ({literal}, {b})")
            stored[number] = (None if a is None else _model_value(table, a), b)
        else:
            statements.append(f"INSERT INTO {table} VALUES ({literal}, {b})")
            key = a if table == "key1" else (a, b)
            stored[key] = (a, b)
    db.execute("; ".join([*statements, "COMMIT"]))
    return list(stored.values())


def _holds(value: int | None, op: str, constant: int) -> bool:
    if value is None:
        return False
    return {
        "=": value == constant,
        "<": value < constant,
        "<=": value <= constant,
        ">": value > constant,
        ">=": value >= constant,
    }[op]


CONDITIONS = st.lists(
    st.tuples(st.sampled_from(OPS), st.integers(-3, 3), st.booleans()), min_size=1, max_size=3
)


def _where(table: str, conditions: list[tuple[str, int, bool]]) -> str:
    terms = []
    for op, constant, flipped in conditions:
        literal = _value(table, constant)
        terms.append(f"{literal} {FLIPPED[op]} a" if flipped else f"a {op} {literal}")
    return " AND ".join(terms)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    table=st.sampled_from(sorted(TABLES)),
    rows=st.lists(st.tuples(st.integers(-4, 4), st.integers(0, 3)), max_size=12),
    nulls=st.integers(0, 2),
    conditions=CONDITIONS,
    also_b=st.booleans(),
)
def test_a_range_read_gives_what_a_filter_gives(db, table, rows, nulls, conditions, also_b) -> None:
    with_nulls: list[tuple[int | None, int]] = list(rows)
    if table == "nullable":
        with_nulls += [(None, n) for n in range(nulls)]
    stored = _load(db, table, with_nulls)
    where = _where(table, conditions)
    if also_b:
        where += " AND b >= 1"
    expected = Counter(
        (a, b)
        for a, b in stored
        if all(_holds(a, op, _model_value(table, c)) for op, c, _ in conditions)
        and (not also_b or b >= 1)
    )
    got = Counter(tuple(r) for r in db.execute(f"SELECT a, b FROM {table} WHERE {where}").rows)
    assert got == expected, where
    plan = db.execute(f"EXPLAIN SELECT a, b FROM {table} WHERE {where}").rows[0][0]
    if table == "nullable":
        assert "range of" not in plan, plan
    elif table != "times" and table != "key1":
        assert plan.endswith("(range of a)"), plan


@pytest.fixture(scope="module")
def big(db: refimpl.Connection) -> list[int]:
    """key1 with 20,000 rows over many blocks, every seventh one deleted again."""
    keys = list(range(-10_000, 10_000))
    db.execute("DELETE FROM key1")
    for start in range(0, len(keys), 5_000):
        values = ", ".join(f"({k}, {k % 4})" for k in keys[start : start + 5_000])
        db.execute(f"INSERT INTO key1 VALUES {values}")
    db.execute("DELETE FROM key1 WHERE b = 3 AND a % 7 = 0")
    return [k for k in keys if not (k % 4 == 3 and k % 7 == 0)]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    low=st.one_of(st.none(), st.integers(-10_100, 10_100)),
    high=st.one_of(st.none(), st.integers(-10_100, 10_100)),
    strict=st.tuples(st.booleans(), st.booleans()),
)
def test_ranges_across_blocks(db, big, low, high, strict) -> None:
    terms = []
    if low is not None:
        terms.append(f"a {'>' if strict[0] else '>='} {low}")
    if high is not None:
        terms.append(f"a {'<' if strict[1] else '<='} {high}")
    where = " AND ".join(terms) or "a = a"
    expected = [
        k
        for k in big
        if (low is None or (k > low if strict[0] else k >= low))
        and (high is None or (k < high if strict[1] else k <= high))
    ]
    got = [r[0] for r in db.execute(f"SELECT a FROM key1 WHERE {where}").rows]
    assert sorted(got) == expected, where


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    committed=st.lists(st.integers(-6, 6), unique=True, max_size=10),
    inserted=st.lists(st.integers(-8, 8), unique=True, max_size=4),
    deleted=st.lists(st.integers(-6, 6), max_size=3),
    conditions=CONDITIONS,
)
def test_a_range_read_in_a_transaction_sees_its_own_changes(
    db, committed, inserted, deleted, conditions
) -> None:
    """Inside a transaction whose writes are not committed, the range read merges them."""
    _load(db, "key2", [(a, 0) for a in committed])
    session = db.session()
    try:
        session.execute("BEGIN")
        model = {(a, 0) for a in committed}
        for a in inserted:
            session.execute(f"INSERT INTO key2 VALUES ({a}, 1)")
            model.add((a, 1))
        for a in deleted:
            session.execute(f"DELETE FROM key2 WHERE a = {a} AND b = 0")
            model.discard((a, 0))
        where = _where("key2", conditions)
        got = sorted(tuple(r) for r in session.execute(f"SELECT a, b FROM key2 WHERE {where}").rows)
        expected = sorted(
            (a, b) for a, b in model if all(_holds(a, op, c) for op, c, _ in conditions)
        )
        assert got == expected, where
        session.execute("ROLLBACK")
    finally:
        session.close()
