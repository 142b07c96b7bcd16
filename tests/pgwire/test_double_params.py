"""A parameter of a float or numeric type the client names, or one whose place makes it a
DOUBLE, runs as the DOUBLE its Describe told: `SELECT $1 * 2` with a `numeric` `$1` is a
`float8` column for `2.5` and for `2` alike, never PostgreSQL's "cached plan must not change
result type" (0A000) because the int4 literal beside it made the dry run an integer's."""

from __future__ import annotations

import pytest
from psycopg import pq

INT4, FLOAT8, NUMERIC = 23, 701, 1700


def _described_and_run(pgconn: pq.abc.PGconn, sql: bytes, oids: list[int], value: bytes):
    name = sql.hex().encode()[:40] + str(oids).encode()
    assert pgconn.prepare(name, sql, param_types=oids).status == pq.ExecStatus.COMMAND_OK
    described = pgconn.describe_prepared(name)
    run = pgconn.exec_prepared(name, [value])
    assert run.status == pq.ExecStatus.TUPLES_OK, run.error_message
    return described.ftype(0), run.ftype(0), run.get_value(0, 0)


@pytest.mark.parametrize("oid", [NUMERIC, FLOAT8])
@pytest.mark.parametrize(("value", "answer"), [(b"2.5", b"5"), (b"2", b"4"), (b"-0.25", b"-0.5")])
def test_a_named_float_or_numeric_parameter_is_a_double_beside_an_integer(
    pg, db, oid: int, value: bytes, answer: bytes
) -> None:
    with pg.connect(db) as conn:
        described, ran, got = _described_and_run(conn.pgconn, b"SELECT $1 * 2", [oid], value)
    assert (described, ran, got) == (FLOAT8, FLOAT8, answer)


def test_an_untyped_parameter_a_function_makes_double_runs_as_one(pg, db) -> None:
    with pg.connect(db) as conn:
        assert _described_and_run(conn.pgconn, b"SELECT abs($1)", [], b"2") == (
            FLOAT8,
            FLOAT8,
            b"2",
        )


def test_a_named_integer_parameter_stays_an_integer(pg, db) -> None:
    with pg.connect(db) as conn:
        pgconn = conn.pgconn
        assert _described_and_run(pgconn, b"SELECT $1 * 2", [INT4], b"3") == (INT4, INT4, b"6")
        # A float parameter still goes into an INT column as the number it is.
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        assert pgconn.prepare(b"ins", b"INSERT INTO t VALUES ($1)", [NUMERIC]).status == 1
        assert pgconn.exec_prepared(b"ins", [b"7"]).status == pq.ExecStatus.COMMAND_OK
        assert conn.execute("SELECT id FROM t").fetchall() == [(7,)]
